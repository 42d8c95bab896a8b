// vectorAdd, as NVIDIA's GPU Operator validator runs it: C = A + B on the GPU,
// every element checked on the host. Exit 0 and "Test PASSED" when all match.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

__global__ void vectorAdd(const float *a, const float *b, float *c, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

static int check(cudaError_t err, const char *what) {
    if (err != cudaSuccess) {
        fprintf(stderr, "%s failed: %s (%s)\n", what, cudaGetErrorString(err),
                cudaGetErrorName(err));
        return 1;
    }
    return 0;
}

int main(void) {
    const int n = 1 << 20;
    const size_t bytes = n * sizeof(float);
    float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
    if (!a || !b || !c) { fprintf(stderr, "host allocation failed\n"); return 1; }
    srand(1234);
    for (int i = 0; i < n; ++i) {
        a[i] = rand() / (float)RAND_MAX;
        b[i] = rand() / (float)RAND_MAX;
    }
    int devices = 0;
    if (check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount")) return 2;
    float *da, *db, *dc;
    if (check(cudaMalloc(&da, bytes), "cudaMalloc") || check(cudaMalloc(&db, bytes), "cudaMalloc") ||
        check(cudaMalloc(&dc, bytes), "cudaMalloc")) return 1;
    if (check(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice), "cudaMemcpy") ||
        check(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice), "cudaMemcpy")) return 1;
    const int threads = 256, blocks = (n + threads - 1) / threads;
    vectorAdd<<<blocks, threads>>>(da, db, dc, n);
    if (check(cudaGetLastError(), "vectorAdd launch") ||
        check(cudaDeviceSynchronize(), "vectorAdd")) return 1;
    if (check(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy")) return 1;
    for (int i = 0; i < n; ++i) {
        if (fabsf(a[i] + b[i] - c[i]) > 1e-5f) {
            fprintf(stderr, "Result verification failed at element %d\n", i);
            return 1;
        }
    }
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    printf("devices=%d runtime=%d driver=%d\n", devices, runtime, driver);
    printf("Test PASSED\n");
    cudaFree(da); cudaFree(db); cudaFree(dc);
    free(a); free(b); free(c);
    return 0;
}
