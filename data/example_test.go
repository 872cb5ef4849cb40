package data_test

import (
	"errors"
	"fmt"
	"io/fs"
	"log"

	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/tensor"
)

func ExampleLoader() {
	ds := data.Synthetic(1000, 10, tensor.Shape{1, 28, 28}, 42)
	loader, err := data.NewLoader(ds, data.LoaderOptions{
		BatchSize: 256,
		Shuffle:   true,
		Seed:      7,
		Shape:     data.ShapeImage, // [B 1 28 28] for a CNN; ShapeFlat gives [B 784]
	})
	if err != nil {
		log.Fatal(err)
	}
	for epoch := range 2 {
		it := loader.Epoch(epoch)
		seen := 0
		for it.Next() {
			ctx := tensor.NewContext() // one scope per step: it owns the batch tensors
			x, y := it.Batch().Tensors(tensor.WithContext(ctx))
			if epoch == 0 && seen == 0 {
				fmt.Println("x", x.Shape(), x.DType(), "y", y.Shape(), y.DType())
			}
			seen += y.Numel() // … forward, backward, optimizer step …
			ctx.Close()
		}
		if err := it.Err(); err != nil {
			log.Fatal(err)
		}
		it.Close()
		fmt.Printf("epoch %d: %d batches, %d examples, first index %d\n", epoch, it.Len(), seen, loader.Order(epoch)[0])
	}
	// Output:
	// x [256 1 28 28] float32 y [256] int64
	// epoch 0: 4 batches, 1000 examples, first index 132
	// epoch 1: 4 batches, 1000 examples, first index 366
}

func ExampleLoadFashionMNIST() {
	train, test, err := data.LoadFashionMNIST("") // /usr/share/datasets/fashion-mnist
	if errors.Is(err, fs.ErrNotExist) {
		// The error says how to get the files (apt-get install dataset-fashion-mnist).
		log.Fatal(err)
	} else if err != nil {
		log.Fatal(err) // a corrupt file: the error names it and the problem
	}
	train = train.Head(10000) // a quick run on the first 10k examples
	x, y := test.Example(0)
	fmt.Println(train.Len(), len(x), data.FashionMNISTClasses[y])
}
