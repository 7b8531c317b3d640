// A real CUDA program (nvcc, -cudart shared) for the no-driver test: on a
// machine without an NVIDIA driver every runtime call fails cleanly, and the
// traced run must behave exactly like the untraced one.
#include <cstdio>

#include <cuda_runtime.h>

__global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

int main() {
  int count = -1;
  cudaError_t e = cudaGetDeviceCount(&count);
  std::printf("cudaGetDeviceCount -> %d (%s), count %d\n", int(e), cudaGetErrorName(e), count);
  float* d = nullptr;
  e = cudaMalloc(&d, 1024 * sizeof(float));
  std::printf("cudaMalloc -> %d\n", int(e));
  if (e == cudaSuccess) {
    add_one<<<4, 256>>>(d, 1024);
    e = cudaDeviceSynchronize();
    std::printf("kernel -> %d\n", int(e));
    cudaFree(d);
  }
  return 0;
}
