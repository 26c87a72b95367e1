/* Calls two functions that `kiln compile` built from samples/aot_c/model.py, from C without
 * Python: `make aot-sample` compiles them into build/aot_c/{mlp,collatz}/, builds this program
 * against their headers and libraries, and runs it.
 *
 * Each exported function takes one pointer per array leaf of its arguments (kiln's pytree
 * flattening order), then one per leaf of its result; it returns 0 or an error code that
 * <NAME>_strerror describes. */
#include <stdio.h>

#include "collatz.h"
#include "mlp.h"

/* Deterministic inputs, exactly representable in float32 (tests/test_aot_c.py computes the
 * same ones in Python): the k-th leaf's i-th element. */
static void fill(float *buffer, int n, int k) {
    for (int i = 0; i < n; i++)
        buffer[i] = (float)(((i + 3 * k) * 37) % 17 - 8) / 16.0f;
}

static void print_floats(const char *name, const float *values, int n) {
    printf("%s:", name);
    for (int i = 0; i < n; i++) printf(" %.9g", values[i]);
    printf("\n");
}

int main(void) {
    /* predict(params, x) with params = [(w1 f32[4,8], b1 f32[8]), (w2 f32[8,3], b2 f32[3])],
     * x f32[2,4]: leaves w1, b1, w2, b2, x in flattening order; result f32[2,3]. */
    float w1[4 * 8], b1[8], w2[8 * 3], b2[3], x[2 * 4], y[2 * 3];
    fill(w1, 4 * 8, 0);
    fill(b1, 8, 1);
    fill(w2, 8 * 3, 2);
    fill(b2, 3, 3);
    fill(x, 2 * 4, 4);
    int status = mlp_predict(w1, b1, w2, b2, x, y);
    if (status != 0) {
        fprintf(stderr, "mlp_predict failed: %s\n", mlp_strerror(status));
        return 1;
    }
    print_floats("predict", y, 2 * 3);

    /* collatz_steps(n) with n i32[6]: a loop whose trip count depends on the values. */
    const int32_t n[6] = {1, 2, 3, 6, 7, 27};
    int32_t steps[6];
    status = collatz_collatz_steps(n, steps);
    if (status != 0) {
        fprintf(stderr, "collatz_steps failed: %s\n", collatz_strerror(status));
        return 1;
    }
    printf("collatz_steps:");
    for (int i = 0; i < 6; i++) printf(" %d", (int)steps[i]);
    printf("\n");
    return 0;
}
