/* The good loop in C (issue 29): the supermarket count chain, the same arithmetic as
 * benchmarks/good_loop.py, so the same states, tables and steps give the same bits.
 *
 * Built by benchmarks/good_loop_c.py with `cc -O3 -march=native -fopenmp -shared -fPIC` and
 * called through ctypes. Replicas over an OpenMP parallel for; each replica runs all its steps
 * with its xoshiro256** state in four local words and its counts in a local array.
 *
 * Layout (row-major, R replicas): states[R][4] uint64, u[R][L + 2] int64 (u_0 = n, a zero
 * sentinel at L + 1), su, sb [R][L + 2] int64 time sums of u_i and [u_i > 0], i = 1..L
 * (filled only when sums != 0), lost[R] arrivals dropped at the level cap L.
 */
#include <stdint.h>
#include <string.h>

#define MAXL 62

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline __attribute__((always_inline)) int64_t replica(
    uint64_t *st, int64_t *uu, const double *pw, uint64_t p64, uint64_t n, int64_t steps, int64_t L,
    int64_t *su, int64_t *sb, const int sums)
{
    uint64_t s0 = st[0], s1 = st[1], s2 = st[2], s3 = st[3], t, w, x;
    int64_t u[MAXL + 2], a[MAXL + 2], b[MAXL + 2], lost = 0;
    memcpy(u, uu, (size_t)(L + 2) * sizeof(int64_t));
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    for (int64_t s = 0; s < steps; s++) {
        /* word 1: the event */
        w = rotl(s1 * 5, 7) * 9;
        t = s1 << 17; s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = rotl(s3, 45);
        /* word 2: U or the rank */
        x = rotl(s1 * 5, 7) * 9;
        t = s1 << 17; s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = rotl(s3, 45);
        if (w < p64) {
            double U = (double)(int64_t)(x >> 11) * 0x1.0p-53;
            int64_t i = 0;
            while (pw[u[i + 1]] > U) i++; /* the sentinel u[L+1] = 0 has pw[0] = 0 */
            if (i < L) u[i + 1]++; else lost++;
        } else {
            /* Lemire: (x n) >> 64 from 32-bit halves, exact for n < 2^32 */
            int64_t r = (int64_t)(((x >> 32) * n + (((x & 0xFFFFFFFFu) * n) >> 32)) >> 32);
            int64_t j = 0;
            while (u[j + 1] > r) j++;
            if (j > 0) u[j]--;
        }
        if (sums) {
            for (int64_t i = 1; i <= L; i++) {
                a[i] += u[i];
                b[i] += u[i] > 0;
            }
        }
    }
    st[0] = s0; st[1] = s1; st[2] = s2; st[3] = s3;
    memcpy(uu, u, (size_t)(L + 2) * sizeof(int64_t));
    if (sums) {
        for (int64_t i = 1; i <= L; i++) { su[i] += a[i]; sb[i] += b[i]; }
    }
    return lost;
}

/* Returns 0, or -1 if L is above MAXL. */
int good_loop_advance(int64_t R, int64_t L, uint64_t n, const double *pw, uint64_t p64, int64_t steps,
                      uint64_t *states, int64_t *u, int64_t *su, int64_t *sb, int64_t *lost, int sums,
                      int threads)
{
    if (L < 1 || L > MAXL) return -1;
    if (sums) {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t r = 0; r < R; r++)
            lost[r] += replica(states + 4 * r, u + (L + 2) * r, pw, p64, n, steps, L, su + (L + 2) * r,
                               sb + (L + 2) * r, 1);
    } else {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t r = 0; r < R; r++)
            lost[r] += replica(states + 4 * r, u + (L + 2) * r, pw, p64, n, steps, L, su + (L + 2) * r,
                               sb + (L + 2) * r, 0);
    }
    return 0;
}
