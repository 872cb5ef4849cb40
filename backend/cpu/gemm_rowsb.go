package cpu

// gemmKernelGoRowsB is the pure-Go twin of the kernels' rowsFnB:
// gemmKernelGoRows with the B micro-panel read in place, step p's nr
// values at b[p*ldb:]. For every i < rows and j < nr it computes
//
//	var acc T
//	for p := 0; p < kc; p++ {
//		acc += a[i*lda+p*astep] * b[p*ldb+j]
//	}
//	if start == nil {
//		c[i*ldc+j] += acc
//	} else {
//		c[i*ldc+j] = start[j] + acc
//	}
func gemmKernelGoRowsB[T float32 | float64](rows, nr, kc int, a []T, lda, astep int, b []T, ldb int, c []T, ldc int, start []T) {
	if start != nil {
		start = start[:nr]
	}
	for i := range rows {
		ci := c[i*ldc:][:nr]
		for j := 0; j < nr; j += 4 {
			var s0, s1, s2, s3 T
			for p := range kc {
				ai := a[i*lda+p*astep]
				bp := b[p*ldb+j:][:4]
				s0 += ai * bp[0]
				s1 += ai * bp[1]
				s2 += ai * bp[2]
				s3 += ai * bp[3]
			}
			if start == nil {
				ci[j] += s0
				ci[j+1] += s1
				ci[j+2] += s2
				ci[j+3] += s3
			} else {
				ci[j] = start[j] + s0
				ci[j+1] = start[j+1] + s1
				ci[j+2] = start[j+2] + s2
				ci[j+3] = start[j+3] + s3
			}
		}
	}
}
