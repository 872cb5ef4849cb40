// Package data feeds training loops: it reads Fashion-MNIST (and MNIST) from IDX files,
// raw or gzip, with strict validation; makes synthetic Gaussian-blob datasets for tests
// and benchmarks that need no files; batches a Dataset with a Loader whose worker
// goroutines prepare the next batches while the current one trains; and reads text for
// character-level language models (Text: Debian's fortunes corpus with LoadFortunes, or
// any file with LoadTextFile), with a vocabulary, a deterministic 90/10 split and Blocks
// of contiguous tokens drawn as a function of (seed, draw) alone.
//
//	train, test, err := data.LoadFashionMNIST("") // "": /usr/share/datasets/fashion-mnist
//	loader, err := data.NewLoader(train, data.LoaderOptions{BatchSize: 128, Shuffle: true, Seed: 1, Shape: data.ShapeImage})
//	for it := loader.Epoch(epoch); it.Next(); {
//		x, y := it.Batch().Tensors(tensor.WithContext(ctx)) // [128 1 28 28] float32, [128] int64
//		…                                                   // forward, backward, step
//	}
//
// Get the data with `apt-get install dataset-fashion-mnist` (Debian), or point
// LoadFashionMNIST at any directory holding the four IDX files; the text corpus with
// `apt-get install fortunes`:
//
//	text, err := data.LoadFortunes("") // "": /usr/share/games/fortunes
//	blocks, err := text.NewBlocks(false, 128, 1) // training split, 128-token blocks
//
// Determinism: with Shuffle, epoch e visits the examples in the order of a permutation
// seeded with Seed+e (Loader.Order), so a run is reproducible and epochs differ; the
// batches come out in that order however many workers build them.
//
// Files that are missing or corrupt are errors naming the file and the problem (a
// *FileError for a file that is there but wrong); misuse such as an example index out
// of range panics.
package data
