__device__ __forceinline__ float max_float32(float a, float b) { return a > b ? a : b; }
extern "C" __global__ void softmax_cross_thread_k0(float* __restrict__ X, float* __restrict__ softmax) {
  __shared__ float max_red[16];
  __shared__ float sum_red[16];
  {
    int i = (int)blockIdx.x;
    {
      float max_1[1];
      {
        float sum[1];
        { int i_1 = 0;
          max_1[i_1] = ((float)-__int_as_float(0x7f800000));
          {
            int k_inner = (int)threadIdx.x;
            {
              float max_acc[1];
              max_acc[0] = ((float)-__int_as_float(0x7f800000));
              for (int k_outer = 0; k_outer < 3; ++k_outer) {
                if ((((k_outer * 16) + k_inner) < 40)) {
                  max_acc[0] = max_float32(max_acc[0], X[((i + i_1)) * 40 + ((k_outer * 16) + k_inner)]);
                }
              }
              max_red[k_inner] = max_acc[0];
            }
          }
          __syncthreads();
          {
            int k_inner = (int)threadIdx.x;
            if ((k_inner < 8)) {
              max_red[k_inner] = max_float32(max_red[k_inner], max_red[(k_inner + 8)]);
            }
          }
          __syncthreads();
          {
            int k_inner = (int)threadIdx.x;
            if ((k_inner < 4)) {
              max_red[k_inner] = max_float32(max_red[k_inner], max_red[(k_inner + 4)]);
            }
          }
          __syncthreads();
          {
            int k_inner = (int)threadIdx.x;
            if ((k_inner < 2)) {
              max_red[k_inner] = max_float32(max_red[k_inner], max_red[(k_inner + 2)]);
            }
          }
          __syncthreads();
          {
            int k_inner = (int)threadIdx.x;
            if ((k_inner < 1)) {
              max_red[k_inner] = max_float32(max_red[k_inner], max_red[(k_inner + 1)]);
            }
          }
          __syncthreads();
          max_1[i_1] = max_float32(max_1[i_1], max_red[0]);
          __syncthreads();
        }
        { int i_2 = 0;
          sum[i_2] = 0.0f;
          {
            int k2_inner = (int)threadIdx.x;
            {
              float sum_acc[1];
              sum_acc[0] = 0.0f;
              for (int k2_outer = 0; k2_outer < 3; ++k2_outer) {
                if ((((k2_outer * 16) + k2_inner) < 40)) {
                  sum_acc[0] = (sum_acc[0] + expf((X[((i + i_2)) * 40 + ((k2_outer * 16) + k2_inner)] - max_1[i_2])));
                }
              }
              sum_red[k2_inner] = sum_acc[0];
            }
          }
          __syncthreads();
          {
            int k2_inner = (int)threadIdx.x;
            if ((k2_inner < 8)) {
              sum_red[k2_inner] = (sum_red[k2_inner] + sum_red[(k2_inner + 8)]);
            }
          }
          __syncthreads();
          {
            int k2_inner = (int)threadIdx.x;
            if ((k2_inner < 4)) {
              sum_red[k2_inner] = (sum_red[k2_inner] + sum_red[(k2_inner + 4)]);
            }
          }
          __syncthreads();
          {
            int k2_inner = (int)threadIdx.x;
            if ((k2_inner < 2)) {
              sum_red[k2_inner] = (sum_red[k2_inner] + sum_red[(k2_inner + 2)]);
            }
          }
          __syncthreads();
          {
            int k2_inner = (int)threadIdx.x;
            if ((k2_inner < 1)) {
              sum_red[k2_inner] = (sum_red[k2_inner] + sum_red[(k2_inner + 1)]);
            }
          }
          __syncthreads();
          sum[i_2] = (sum[i_2] + sum_red[0]);
          __syncthreads();
        }
        for (int j_outer = 0; j_outer < 3; ++j_outer) {
          {
            int j_inner = (int)threadIdx.x;
            if ((((j_outer * 16) + j_inner) < 40)) {
              softmax[(i) * 40 + ((j_outer * 16) + j_inner)] = (expf((X[(i) * 40 + ((j_outer * 16) + j_inner)] - max_1[0])) / sum[0]);
            }
          }
        }
      }
    }
  }
}
