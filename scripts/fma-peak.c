// fma-peak measures the CPU's FP32 FMA peak with AVX-512: 12 independent chains of
// VFMADD on zmm registers per thread (enough to cover the FMA latency on both ports),
// nothing loaded or stored. It is the ceiling the FP32 GEMMs of backend/cpu are measured
// against (docs/decisions.md, "What FP32 can reach on this CPU"). With "bf16" after the
// thread count it measures VDPBF16PS instead (two multiply-adds a lane, counted as 4
// FLOP): the ceiling of the BF16 GEMMs on a CPU without AMX. Build with -mavx512bf16
// for that (the FP32 measurement runs on any AVX-512 CPU).
//
//	gcc -O3 -funroll-all-loops -mavx512f -mavx512bf16 -mfma -o /tmp/fma-peak scripts/fma-peak.c -lpthread
//	/tmp/fma-peak 1 && /tmp/fma-peak 2 && /tmp/fma-peak 1 bf16 && /tmp/fma-peak 2 bf16
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ITERS 200000000L

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *run(void *out) {
	__m512 a[12];
	__m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-9f);
	for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
	for (long k = 0; k < ITERS / 12; k++)
		for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], b, c);
	float s = 0;
	for (int i = 0; i < 12; i++) s += _mm512_reduce_add_ps(a[i]);
	*(float *)out = s; // keeps the chains alive
	return 0;
}

#ifdef __AVX512BF16__
static void *runBF16(void *out) {
	__m512 a[12];
	__m512bh b = (__m512bh)_mm512_set1_epi16(0x3f80), c = (__m512bh)_mm512_set1_epi16(0x3000);
	for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
	for (long k = 0; k < ITERS / 12; k++)
		for (int i = 0; i < 12; i++) a[i] = _mm512_dpbf16_ps(a[i], b, c);
	float s = 0;
	for (int i = 0; i < 12; i++) s += _mm512_reduce_add_ps(a[i]);
	*(float *)out = s;
	return 0;
}
#endif

int main(int argc, char **argv) {
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	int bf16 = argc > 2 && strcmp(argv[2], "bf16") == 0;
	if (threads < 1 || threads > 64 || (argc > 2 && !bf16)) {
		fprintf(stderr, "usage: fma-peak [threads 1..64 [bf16]]\n");
		return 2;
	}
	void *(*fn)(void *) = run;
	if (bf16) {
#ifdef __AVX512BF16__
		fn = runBF16;
#else
		fprintf(stderr, "fma-peak: built without -mavx512bf16\n");
		return 2;
#endif
	}
	pthread_t t[64];
	float s[64];
	double t0 = now();
	for (int i = 0; i < threads; i++) pthread_create(&t[i], 0, fn, &s[i]);
	for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
	double dt = now() - t0;
	printf("%d thread(s): %.1f GFLOP/s %s (AVX-512)\n", threads,
	       threads * (double)(ITERS / 12 * 12) * (bf16 ? 64 : 32) / dt / 1e9, bf16 ? "BF16 VDPBF16PS" : "FP32 FMA");
	return 0;
}
