// kernel-ceiling measures what an AVX-512 FP32 GEMM micro-kernel with 24 accumulators
// can reach on this CPU, A and B in L1 (a KC-deep panel pair swept again and again),
// so that the Go kernels of backend/cpu (BenchmarkGemmMicroKernel) can be set against
// the loop shapes they could have had. Each variant runs the same 24 FMAs per k step:
//
//	peak   the FMAs alone, nothing loaded (the core's FMA ceiling)
//	regA   12×32 tile, the two B vectors loaded, the A values held in registers
//	       (not a GEMM: what the loop would run at if broadcasts were free)
//	bcst   12×32 tile, 12 VBROADCASTSS of A and 2 loads of B (gamp's float32 kernel)
//	bcst+pf  bcst with the Go kernels' two PREFETCHT0 of B per k step
//	embed  12×32 tile, each FMA reading its A value by an embedded broadcast {1to16}
//	6x64   6×64 tile, 6 VBROADCASTSS of A and 4 loads of B
//	8x48   8×48 tile, 8 VBROADCASTSS of A and 3 loads of B
//	pairs  12×32 tile, 6 VBROADCASTSD of row pairs of A and 4 loads of B (B and B with
//	       adjacent lanes swapped, packed side by side)
//	pairs+pf  pairs with four PREFETCHT0 of B per k step
//	pairperm  pairs with the swapped B made by two VPERMILPS (port 5) from 2 B loads
//	dpbf16  peak with VDPBF16PS for VFMADD231PS: the BF16 ceiling (each instruction
//	        two multiply-adds a lane; counted as such), where the CPU has AVX512_BF16
//	dpbf16+bc  12×32 tile, 12 VPBROADCASTD of A's bf16 pairs, 2 loads of B's pairs,
//	        24 VDPBF16PS (gamp's bf16 kernel loop, gemmBF16Kernel12x32)
//
// Rounds alternate the variants; each figure is the median over the rounds, GFLOP/s
// summed over the threads (each thread has its own panels).
//
//	gcc -O2 -mavx512f -o /tmp/kernel-ceiling scripts/kernel-ceiling.c -lpthread
//	/tmp/kernel-ceiling 1 && /tmp/kernel-ceiling 2     # KC 128
//	/tmp/kernel-ceiling 1 256                           # BenchmarkGemmMicroKernel's depth
//	/tmp/kernel-ceiling 2 256 peak,dpbf16               # only these variants
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long KC = 128;                // panel depth (second argument)
#define WORK (200000L * 128) // k steps per thread and measurement
#define ROUNDS 7

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

#define S(x) #x
#define FMA(b, a, c) "vfmadd231ps %%zmm" S(b) ", %%zmm" S(a) ", %%zmm" S(c) "\n\t"
// ROW12: row i of the 12×32 tile with A broadcast from memory into zmm26.
#define BC(off, c0, c1) "vbroadcastss " S(off) "(%[a]), %%zmm26\n\t" FMA(24, 26, c0) FMA(25, 26, c1)
#define EB(off, c0, c1)                                                            \
	"vfmadd231ps " S(off) "(%[a])%{1to16%}, %%zmm24, %%zmm" S(c0) "\n\t"              \
	"vfmadd231ps " S(off) "(%[a])%{1to16%}, %%zmm25, %%zmm" S(c1) "\n\t"
#define RA(r, c0, c1) FMA(24, r, c0) FMA(25, r, c1)
#define ZERO24                                                                         \
	"vpxord %%zmm0, %%zmm0, %%zmm0\n\t"                                                \
	"vmovaps %%zmm0, %%zmm1\n\tvmovaps %%zmm0, %%zmm2\n\tvmovaps %%zmm0, %%zmm3\n\t"   \
	"vmovaps %%zmm0, %%zmm4\n\tvmovaps %%zmm0, %%zmm5\n\tvmovaps %%zmm0, %%zmm6\n\t"   \
	"vmovaps %%zmm0, %%zmm7\n\tvmovaps %%zmm0, %%zmm8\n\tvmovaps %%zmm0, %%zmm9\n\t"   \
	"vmovaps %%zmm0, %%zmm10\n\tvmovaps %%zmm0, %%zmm11\n\tvmovaps %%zmm0, %%zmm12\n\t" \
	"vmovaps %%zmm0, %%zmm13\n\tvmovaps %%zmm0, %%zmm14\n\tvmovaps %%zmm0, %%zmm15\n\t" \
	"vmovaps %%zmm0, %%zmm16\n\tvmovaps %%zmm0, %%zmm17\n\tvmovaps %%zmm0, %%zmm18\n\t" \
	"vmovaps %%zmm0, %%zmm19\n\tvmovaps %%zmm0, %%zmm20\n\tvmovaps %%zmm0, %%zmm21\n\t" \
	"vmovaps %%zmm0, %%zmm22\n\tvmovaps %%zmm0, %%zmm23\n\t"
// STORE24 adds the accumulators into c (24 vectors) so that the work is kept.
#define ST(i) "vaddps " S(i) "*64(%[c]), %%zmm" S(i) ", %%zmm" S(i) "\n\tvmovups %%zmm" S(i) ", " S(i) "*64(%[c])\n\t"
#define STORE24                                                                        \
	ST(0) ST(1) ST(2) ST(3) ST(4) ST(5) ST(6) ST(7) ST(8) ST(9) ST(10) ST(11) ST(12)   \
	ST(13) ST(14) ST(15) ST(16) ST(17) ST(18) ST(19) ST(20) ST(21) ST(22) ST(23)
#define CLOB                                                                            \
	"memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",     \
	    "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",  \
	    "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", \
	    "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31"

typedef void kernel(const float *a, const float *b, float *c);

#define DP(b, a, c) "vdpbf16ps %%zmm" S(b) ", %%zmm" S(a) ", %%zmm" S(c) "\n\t"
#define RD(r, c0, c1) DP(24, r, c0) DP(25, r, c1)
#define BD(off, c0, c1) "vpbroadcastd " S(off) "(%[a]), %%zmm26\n\t" DP(24, 26, c0) DP(25, 26, c1)

// PEAK defines a ceiling loop: 24 independent accumulator chains, nothing loaded in
// the loop; ROW is RA (VFMADD231PS) or RD (VDPBF16PS), BCST the broadcast that sets
// the A register.
#define PEAK(name, ROW, BCST)                                                                  \
	static void name(const float *a, const float *b, float *c) {                                \
		long k = KC;                                                                              \
		__asm__ volatile(ZERO24 BCST " (%[a]), %%zmm24\n\tvmovups (%[b]), %%zmm25\n\t"             \
		                 "1:\n\t" ROW(24, 0, 1) ROW(24, 2, 3) ROW(24, 4, 5) ROW(24, 6, 7)             \
		                     ROW(24, 8, 9) ROW(24, 10, 11) ROW(24, 12, 13) ROW(24, 14, 15)            \
		                         ROW(24, 16, 17) ROW(24, 18, 19) ROW(24, 20, 21) ROW(24, 22, 23)      \
		                 "dec %[k]\n\tjnz 1b\n\t" STORE24                                          \
		                 : [k] "+r"(k)                                                           \
		                 : [a] "r"(a), [b] "r"(b), [c] "r"(c)                                    \
		                 : CLOB);                                                                \
	}
PEAK(k_peak, RA, "vbroadcastss")
PEAK(k_dpbf16, RD, "vpbroadcastd")

static void k_regA(const float *a, const float *b, float *c) {
	long k = KC;
	__asm__ volatile(ZERO24 "vbroadcastss 0(%[a]), %%zmm26\n\tvbroadcastss 4(%[a]), %%zmm27\n\t"
	                        "vbroadcastss 8(%[a]), %%zmm28\n\tvbroadcastss 12(%[a]), %%zmm29\n\t"
	                        "vbroadcastss 16(%[a]), %%zmm30\n\tvbroadcastss 20(%[a]), %%zmm31\n\t"
	                 "1:\n\t"
	                 "vmovups (%[b]), %%zmm24\n\tvmovups 64(%[b]), %%zmm25\n\t" RA(26, 0, 1)
	                     RA(27, 2, 3) RA(28, 4, 5) RA(29, 6, 7) RA(30, 8, 9) RA(31, 10, 11)
	                         RA(26, 12, 13) RA(27, 14, 15) RA(28, 16, 17) RA(29, 18, 19)
	                             RA(30, 20, 21) RA(31, 22, 23)
	                 "add $128, %[b]\n\tdec %[k]\n\tjnz 1b\n\t" STORE24
	                 : [k] "+r"(k), [b] "+r"(b)
	                 : [a] "r"(a), [c] "r"(c)
	                 : CLOB);
}

// K12x32 defines a 12×32 kernel whose row i runs ROW(4·i, 2i, 2i+1) after the two B
// loads: BC (broadcast) or EB (embedded broadcasts).
#define TILE12(ROW)                                                                      \
	ROW(0, 0, 1) ROW(4, 2, 3) ROW(8, 4, 5) ROW(12, 6, 7) ROW(16, 8, 9) ROW(20, 10, 11)  \
	ROW(24, 12, 13) ROW(28, 14, 15) ROW(32, 16, 17) ROW(36, 18, 19) ROW(40, 20, 21)     \
	ROW(44, 22, 23)
#define K12x32(name, ROW, PF)                                                            \
	static void name(const float *a, const float *b, float *c) {                        \
		long k = KC;                                                                      \
		__asm__ volatile(ZERO24 "1:\n\t"                                                 \
		                 "vmovups (%[b]), %%zmm24\n\tvmovups 64(%[b]), %%zmm25\n\t" PF   \
		                 TILE12(ROW)                                                      \
		                 "add $48, %[a]\n\tadd $128, %[b]\n\tdec %[k]\n\tjnz 1b\n\t" STORE24 \
		                 : [k] "+r"(k), [a] "+r"(a), [b] "+r"(b)                          \
		                 : [c] "r"(c)                                                     \
		                 : CLOB);                                                         \
	}
// PF2 is the Go kernels' prefetch of the B panel 8 k steps ahead.
#define PF2 "prefetcht0 1024(%[b])\n\tprefetcht0 1088(%[b])\n\t"
K12x32(k_bcst, BC, "")
K12x32(k_bcstpf, BC, PF2)
K12x32(k_embed, EB, "")
K12x32(k_dpbf16bc, BD, "")

// 6×64: B in zmm24-27, A broadcast into zmm28.
#define B4(off, c)                                                                      \
	"vbroadcastss " S(off) "(%[a]), %%zmm28\n\t" FMA(24, 28, c) FMA(25, 28, c + 1)      \
	    FMA(26, 28, c + 2) FMA(27, 28, c + 3)
static void k_6x64(const float *a, const float *b, float *c) {
	long k = KC;
	__asm__ volatile(ZERO24 "1:\n\t"
	                 "vmovups (%[b]), %%zmm24\n\tvmovups 64(%[b]), %%zmm25\n\t"
	                 "vmovups 128(%[b]), %%zmm26\n\tvmovups 192(%[b]), %%zmm27\n\t"
	                 "vbroadcastss 0(%[a]), %%zmm28\n\t" FMA(24, 28, 0) FMA(25, 28, 1) FMA(26, 28, 2) FMA(27, 28, 3)
	                 "vbroadcastss 4(%[a]), %%zmm29\n\t" FMA(24, 29, 4) FMA(25, 29, 5) FMA(26, 29, 6) FMA(27, 29, 7)
	                 "vbroadcastss 8(%[a]), %%zmm30\n\t" FMA(24, 30, 8) FMA(25, 30, 9) FMA(26, 30, 10) FMA(27, 30, 11)
	                 "vbroadcastss 12(%[a]), %%zmm31\n\t" FMA(24, 31, 12) FMA(25, 31, 13) FMA(26, 31, 14) FMA(27, 31, 15)
	                 "vbroadcastss 16(%[a]), %%zmm28\n\t" FMA(24, 28, 16) FMA(25, 28, 17) FMA(26, 28, 18) FMA(27, 28, 19)
	                 "vbroadcastss 20(%[a]), %%zmm29\n\t" FMA(24, 29, 20) FMA(25, 29, 21) FMA(26, 29, 22) FMA(27, 29, 23)
	                 "add $24, %[a]\n\tadd $256, %[b]\n\tdec %[k]\n\tjnz 1b\n\t" STORE24
	                 : [k] "+r"(k), [a] "+r"(a), [b] "+r"(b)
	                 : [c] "r"(c)
	                 : CLOB);
}

// 8×48: B in zmm24-26, A broadcast into zmm27-30 in turn.
#define B3(off, r, c0, c1, c2) "vbroadcastss " S(off) "(%[a]), %%zmm" S(r) "\n\t" FMA(24, r, c0) FMA(25, r, c1) FMA(26, r, c2)
static void k_8x48(const float *a, const float *b, float *c) {
	long k = KC;
	__asm__ volatile(ZERO24 "1:\n\t"
	                 "vmovups (%[b]), %%zmm24\n\tvmovups 64(%[b]), %%zmm25\n\tvmovups 128(%[b]), %%zmm26\n\t"
	                 B3(0, 27, 0, 1, 2) B3(4, 28, 3, 4, 5) B3(8, 29, 6, 7, 8) B3(12, 30, 9, 10, 11)
	                 B3(16, 27, 12, 13, 14) B3(20, 28, 15, 16, 17) B3(24, 29, 18, 19, 20) B3(28, 30, 21, 22, 23)
	                 "add $32, %[a]\n\tadd $192, %[b]\n\tdec %[k]\n\tjnz 1b\n\t" STORE24
	                 : [k] "+r"(k), [a] "+r"(a), [b] "+r"(b)
	                 : [c] "r"(c)
	                 : CLOB);
}

// pairs: 12×32 tile with the A values of two adjacent rows broadcast together
// (VBROADCASTSD, [a(2i), a(2i+1)] repeated) against B and B with adjacent lanes swapped
// (packed beside it): accumulator 4i holds rows 2i/2i+1 at even/odd columns of the first
// half, 4i+2 the other parity, and so on. 6 broadcasts and 4 B loads per 24 FMAs; each C
// element still gets its FMAs in k order (the lanes are sorted back once per tile).
#define PR(off, r, c0, c1, c2, c3)                                                      \
	"vbroadcastsd " S(off) "(%[a]), %%zmm" S(r) "\n\t" FMA(24, r, c0) FMA(25, r, c1)     \
	    FMA(26, r, c2) FMA(27, r, c3)
#define KPAIRS(name, PF, BSTEP)                                                          \
	static void name(const float *a, const float *b, float *c) {                       \
		long k = KC;                                                                     \
		__asm__ volatile(ZERO24 "1:\n\t"                                                \
		                 "vmovups (%[b]), %%zmm24\n\tvmovups 64(%[b]), %%zmm25\n\t"     \
		                 "vmovups 128(%[b]), %%zmm26\n\tvmovups 192(%[b]), %%zmm27\n\t" PF \
		                 PR(0, 28, 0, 1, 2, 3) PR(8, 29, 4, 5, 6, 7) PR(16, 30, 8, 9, 10, 11)  \
		                 PR(24, 31, 12, 13, 14, 15) PR(32, 28, 16, 17, 18, 19)                 \
		                 PR(40, 29, 20, 21, 22, 23)                                            \
		                 "add $48, %[a]\n\tadd $" S(BSTEP) ", %[b]\n\tdec %[k]\n\tjnz 1b\n\t" STORE24 \
		                 : [k] "+r"(k), [a] "+r"(a), [b] "+r"(b)                         \
		                 : [c] "r"(c)                                                    \
		                 : CLOB);                                                        \
	}
#define PF4 "prefetcht0 2048(%[b])\n\tprefetcht0 2112(%[b])\n\tprefetcht0 2176(%[b])\n\tprefetcht0 2240(%[b])\n\t"
KPAIRS(k_pairs, "", 256)
KPAIRS(k_pairspf, PF4, 256)
// pairs-perm: the swapped B made in registers (VPERMILPS, port 5) from two B loads.
static void k_pairsperm(const float *a, const float *b, float *c) {
	long k = KC;
	__asm__ volatile(ZERO24 "1:\n\t"
	                 "vmovups (%[b]), %%zmm24\n\tvmovups 64(%[b]), %%zmm25\n\t"
	                 "vpermilps $0xb1, %%zmm24, %%zmm26\n\tvpermilps $0xb1, %%zmm25, %%zmm27\n\t"
	                 PR(0, 28, 0, 1, 2, 3) PR(8, 29, 4, 5, 6, 7) PR(16, 30, 8, 9, 10, 11)
	                 PR(24, 31, 12, 13, 14, 15) PR(32, 28, 16, 17, 18, 19) PR(40, 29, 20, 21, 22, 23)
	                 "add $48, %[a]\n\tadd $128, %[b]\n\tdec %[k]\n\tjnz 1b\n\t" STORE24
	                 : [k] "+r"(k), [a] "+r"(a), [b] "+r"(b)
	                 : [c] "r"(c)
	                 : CLOB);
}

static struct {
	const char *name;
	kernel *fn;
	int bf16; // VDPBF16PS: two multiply-adds a lane, run only where the CPU has them
} variants[] = {{"peak", k_peak}, {"regA", k_regA}, {"bcst", k_bcst}, {"bcst+pf", k_bcstpf}, {"embed", k_embed}, {"6x64", k_6x64}, {"8x48", k_8x48}, {"pairs", k_pairs}, {"pairs+pf", k_pairspf}, {"pairperm", k_pairsperm}, {"dpbf16", k_dpbf16, 1}, {"dpbf16+bc", k_dpbf16bc, 1}};
#define NV (int)(sizeof variants / sizeof variants[0])

struct job {
	kernel *fn;
	float *a, *b, *c;
};

static void *run(void *p) {
	struct job *j = p;
	for (long s = 0; s < WORK / KC; s++) j->fn(j->a, j->b, j->c);
	return 0;
}

// alloc64 returns n floats aligned to a cache line.
static float *alloc64(long n) { return aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64); }

static int cmp(const void *x, const void *y) {
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

int main(int argc, char **argv) {
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	KC = argc > 2 ? atol(argv[2]) : 128;
	const char *only = argc > 3 ? argv[3] : 0; // comma-separated variant names
	if (threads < 1 || threads > 64 || KC < 1 || KC > 4096) {
		fprintf(stderr, "usage: kernel-ceiling [threads 1..64 [kc 1..4096 [variant,...]]]\n");
		return 2;
	}
	int run_v[NV];
	for (int v = 0; v < NV; v++) {
		run_v[v] = !only;
		for (const char *p = only; p && *p;) {
			size_t n = strcspn(p, ",");
			if (n == strlen(variants[v].name) && !strncmp(p, variants[v].name, n)) run_v[v] = 1;
			p += n + (p[n] == ',');
		}
	}
	struct job jobs[64];
	for (int t = 0; t < threads; t++) {
		// Panels for the widest variant: A 12·KC floats, B 64·KC floats (and the
		// prefetches' reach past the end).
		jobs[t].a = alloc64(12 * KC);
		jobs[t].b = alloc64(64 * KC + 1024);
		jobs[t].c = alloc64(24 * 16);
		for (int i = 0; i < 12 * KC; i++) jobs[t].a[i] = 1e-3f * (i % 7);
		for (int i = 0; i < 64 * KC + 1024; i++) jobs[t].b[i] = 1e-3f * (i % 5);
		memset(jobs[t].c, 0, 24 * 16 * sizeof(float));
	}
	double g[NV][ROUNDS];
	__builtin_cpu_init();
	int hasBF16 = __builtin_cpu_supports("avx512bf16");
	for (int r = 0; r < ROUNDS; r++) {
		for (int v = 0; v < NV; v++) {
			if (!run_v[v] || (variants[v].bf16 && !hasBF16)) {
				g[v][r] = 0;
				continue;
			}
			pthread_t th[64];
			double t0 = now();
			for (int t = 0; t < threads; t++) {
				jobs[t].fn = variants[v].fn;
				pthread_create(&th[t], 0, run, &jobs[t]);
			}
			for (int t = 0; t < threads; t++) pthread_join(th[t], 0);
			g[v][r] = (variants[v].bf16 ? 2 : 1) * threads * 2.0 * 24 * 16 * KC * (WORK / KC) / (now() - t0) / 1e9;
		}
	}
	printf("%d thread(s), KC %ld, A and B in L1; GFLOP/s, median (min-max) of %d alternated rounds\n", threads, KC, ROUNDS);
	for (int v = 0; v < NV; v++) {
		if (!run_v[v]) continue;
		qsort(g[v], ROUNDS, sizeof(double), cmp);
		if (variants[v].bf16 && !hasBF16) {
			printf("  %-9s (no AVX512_BF16 on this CPU)\n", variants[v].name);
			continue;
		}
		printf("  %-9s %6.1f  (%.1f-%.1f)\n", variants[v].name, g[v][ROUNDS / 2], g[v][0], g[v][ROUNDS - 1]);
	}
	return 0;
}
