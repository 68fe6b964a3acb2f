/* Calls a matmul built by `autosched build` from C and checks it against a naive loop.
 *
 * The header comes with the library and fixes the shapes (MATMUL_A_DIM0 = M, ...), so this file
 * follows whatever shapes the library was built for. Build and run: see README.md (or `make run`).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "matmul.h"

#define M MATMUL_A_DIM0
#define K MATMUL_A_DIM1
#define N MATMUL_B_DIM1

int main(void) {
    float *a = malloc(sizeof(float) * M * K);
    float *b = malloc(sizeof(float) * K * N);
    float *c = malloc(sizeof(float) * M * N);
    if (!a || !b || !c) {
        fprintf(stderr, "out of memory\n");
        return 2;
    }
    for (int i = 0; i < M * K; i++) a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    for (int i = 0; i < K * N; i++) b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;

    autosched_matmul(a, b, c); /* the tuned kernel (every symbol of the library has the prefix) */

    int bad = 0;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double ref = 0.0;
            for (int k = 0; k < K; k++) ref += (double)a[i * K + k] * b[k * N + j];
            double err = fabs(c[i * N + j] - ref);
            if (err > 1e-4 * (1.0 + fabs(ref))) {
                if (bad < 5) fprintf(stderr, "C[%d][%d] = %g, expected %g\n", i, j, c[i * N + j], ref);
                bad++;
            }
        }
    }
    free(a);
    free(b);
    free(c);
    if (bad) {
        fprintf(stderr, "FAILED: %d of %d elements differ\n", bad, M * N);
        return 1;
    }
    printf("OK: matmul %dx%dx%d matches the naive loop\n", M, N, K);
    return 0;
}
