// Arithmetic peak of one and two cores: 10 independent chains of 512-bit f32 FMA, bf16 dot
// product (vdpbf16ps) and int8 dot product (vpdpbusd), 2 ops per multiply-add.
//
// Each chain starts from a different value. If they all start equal (as in an earlier probe),
// gcc -O2 proves the ten chains identical, keeps one, and the loop measures the latency of a
// single dependent chain while the count assumes ten: check with
//   objdump -d peak | grep -c vpdpbusd   (10 in the loop here).
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#define ITERS 20000000L
#define CHAINS 10
// Spelled out (not a loop over an array) so the ten accumulators live in registers.
#define TEN(op) op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7) op(8) op(9)

int main(void) {
    for (int threads = 1; threads <= 2; threads++) {
        double t0 = now();
        float fsink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : fsink)
        {
            __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.999999f);
#define FMA(c) a##c = _mm512_fmadd_ps(x, y, a##c);
#define INIT_F(c) __m512 a##c = _mm512_set1_ps(1e-9f * (c + 1));
#define SUM_F(c) fsink += _mm512_reduce_add_ps(a##c);
            TEN(INIT_F)
            for (long i = 0; i < ITERS; i++) { TEN(FMA) }
            TEN(SUM_F)
        }
        double dt = now() - t0;
        printf("threads %d f32 fma512:   %7.1f GFLOP/s (%g)\n", threads,
               threads * (double)ITERS * CHAINS * 16 * 2 / dt / 1e9, fsink);

        t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : fsink)
        {
            __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80);
#define DPBF(c) b##c = _mm512_dpbf16_ps(b##c, x, x);
#define INIT_B(c) __m512 b##c = _mm512_set1_ps((float)c);
#define SUM_B(c) fsink += _mm512_reduce_add_ps(b##c);
            TEN(INIT_B)
            for (long i = 0; i < ITERS; i++) { TEN(DPBF) }
            TEN(SUM_B)
        }
        dt = now() - t0;
        printf("threads %d bf16 dp512:   %7.1f GFLOP/s (%g)\n", threads,
               threads * (double)ITERS * CHAINS * 32 * 2 / dt / 1e9, fsink);

        t0 = now();
        long isink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : isink)
        {
            __m512i x = _mm512_set1_epi8(1);
#define DPBUSD(c) i##c = _mm512_dpbusd_epi32(i##c, x, x);
#define INIT_I(c) __m512i i##c = _mm512_set1_epi32(c);
#define SUM_I(c) isink += _mm512_reduce_add_epi32(i##c);
            TEN(INIT_I)
            for (long i = 0; i < ITERS; i++) { TEN(DPBUSD) }
            TEN(SUM_I)
        }
        dt = now() - t0;
        printf("threads %d int8 vnni512: %7.1f GOP/s (%ld)\n", threads,
               threads * (double)ITERS * CHAINS * 64 * 2 / dt / 1e9, isink);
    }
    return 0;
}
