inline float max_float32(float a, float b) { return a > b ? a : b; }
__kernel void softmax_cross_thread_k0(__global float* restrict X, __global float* restrict softmax) {
  __local float max_red[16];
  __local float sum_red[16];
  {
    int i = (int)get_group_id(0);
    {
      float max_1[1];
      {
        float sum[1];
        { int i_1 = 0;
          max_1[i_1] = ((float)-INFINITY);
          {
            int k_inner = (int)get_local_id(0);
            {
              float max_acc[1];
              max_acc[0] = ((float)-INFINITY);
              for (int k_outer = 0; k_outer < 3; ++k_outer) {
                if ((((k_outer * 16) + k_inner) < 40)) {
                  max_acc[0] = max_float32(max_acc[0], X[((i + i_1)) * 40 + ((k_outer * 16) + k_inner)]);
                }
              }
              max_red[k_inner] = max_acc[0];
            }
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          {
            int k_inner = (int)get_local_id(0);
            if ((k_inner < 8)) {
              max_red[k_inner] = max_float32(max_red[k_inner], max_red[(k_inner + 8)]);
            }
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          {
            int k_inner = (int)get_local_id(0);
            if ((k_inner < 4)) {
              max_red[k_inner] = max_float32(max_red[k_inner], max_red[(k_inner + 4)]);
            }
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          {
            int k_inner = (int)get_local_id(0);
            if ((k_inner < 2)) {
              max_red[k_inner] = max_float32(max_red[k_inner], max_red[(k_inner + 2)]);
            }
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          {
            int k_inner = (int)get_local_id(0);
            if ((k_inner < 1)) {
              max_red[k_inner] = max_float32(max_red[k_inner], max_red[(k_inner + 1)]);
            }
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          max_1[i_1] = max_float32(max_1[i_1], max_red[0]);
          barrier(CLK_LOCAL_MEM_FENCE);
        }
        { int i_2 = 0;
          sum[i_2] = 0.0f;
          {
            int k2_inner = (int)get_local_id(0);
            {
              float sum_acc[1];
              sum_acc[0] = 0.0f;
              for (int k2_outer = 0; k2_outer < 3; ++k2_outer) {
                if ((((k2_outer * 16) + k2_inner) < 40)) {
                  sum_acc[0] = (sum_acc[0] + exp((X[((i + i_2)) * 40 + ((k2_outer * 16) + k2_inner)] - max_1[i_2])));
                }
              }
              sum_red[k2_inner] = sum_acc[0];
            }
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          {
            int k2_inner = (int)get_local_id(0);
            if ((k2_inner < 8)) {
              sum_red[k2_inner] = (sum_red[k2_inner] + sum_red[(k2_inner + 8)]);
            }
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          {
            int k2_inner = (int)get_local_id(0);
            if ((k2_inner < 4)) {
              sum_red[k2_inner] = (sum_red[k2_inner] + sum_red[(k2_inner + 4)]);
            }
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          {
            int k2_inner = (int)get_local_id(0);
            if ((k2_inner < 2)) {
              sum_red[k2_inner] = (sum_red[k2_inner] + sum_red[(k2_inner + 2)]);
            }
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          {
            int k2_inner = (int)get_local_id(0);
            if ((k2_inner < 1)) {
              sum_red[k2_inner] = (sum_red[k2_inner] + sum_red[(k2_inner + 1)]);
            }
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          sum[i_2] = (sum[i_2] + sum_red[0]);
          barrier(CLK_LOCAL_MEM_FENCE);
        }
        for (int j_outer = 0; j_outer < 3; ++j_outer) {
          {
            int j_inner = (int)get_local_id(0);
            if ((((j_outer * 16) + j_inner) < 40)) {
              softmax[(i) * 40 + ((j_outer * 16) + j_inner)] = (exp((X[(i) * 40 + ((j_outer * 16) + j_inner)] - max_1[0])) / sum[0]);
            }
          }
        }
      }
    }
  }
}
