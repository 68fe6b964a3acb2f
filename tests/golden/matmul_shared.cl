inline int floordiv_int32(int a, int b) { return (a % b != 0 && ((a < 0) != (b < 0))) ? a / b - 1 : a / b; }
inline int floormod_int32(int a, int b) { return (a % b != 0 && ((a < 0) != (b < 0))) ? a % b + b : a % b; }
__kernel void matmul_shared_k0(__global float* restrict A, __global float* restrict B, __global float* restrict C) {
  __local float A_shared[32];
  __local float B_shared[32];
  {
    int i_outer_j_outer_fused = (int)get_group_id(0);
    {
      int i_inner_outer_j_inner_outer_fused = (int)get_local_id(0);
      {
        float C_local[4];
        for (int i = 0; i < 2; ++i) {
          vstore2((float2)(0.0f), 0, C_local + (i * 2));
        }
        for (int k_outer = 0; k_outer < 3; ++k_outer) {
          for (int ax0_ax1_fused_outer = 0; ax0_ax1_fused_outer < 2; ++ax0_ax1_fused_outer) {
            {
              int ax0_ax1_fused_inner = (int)get_local_id(0);
              A_shared[(floordiv_int32(((ax0_ax1_fused_outer * 16) + ax0_ax1_fused_inner), 4)) * 4 + floormod_int32(((ax0_ax1_fused_outer * 16) + ax0_ax1_fused_inner), 4)] = A[(((floordiv_int32(i_outer_j_outer_fused, 2) * 8) + floordiv_int32(((ax0_ax1_fused_outer * 16) + ax0_ax1_fused_inner), 4))) * 12 + ((k_outer * 4) + floormod_int32(((ax0_ax1_fused_outer * 16) + ax0_ax1_fused_inner), 4))];
            }
          }
          for (int ax0_ax1_fused_outer_1 = 0; ax0_ax1_fused_outer_1 < 2; ++ax0_ax1_fused_outer_1) {
            {
              int ax0_ax1_fused_inner_1 = (int)get_local_id(0);
              B_shared[(floordiv_int32(((ax0_ax1_fused_outer_1 * 16) + ax0_ax1_fused_inner_1), 8)) * 8 + floormod_int32(((ax0_ax1_fused_outer_1 * 16) + ax0_ax1_fused_inner_1), 8)] = B[(((k_outer * 4) + floordiv_int32(((ax0_ax1_fused_outer_1 * 16) + ax0_ax1_fused_inner_1), 8))) * 16 + ((floormod_int32(i_outer_j_outer_fused, 2) * 8) + floormod_int32(((ax0_ax1_fused_outer_1 * 16) + ax0_ax1_fused_inner_1), 8))];
            }
          }
          barrier(CLK_LOCAL_MEM_FENCE);
          for (int k_inner = 0; k_inner < 4; ++k_inner) {
            for (int i = 0; i < 2; ++i) {
              vstore2((vload2(0, C_local + (i * 2)) + (A_shared[(((floordiv_int32(i_inner_outer_j_inner_outer_fused, 4) * 2) + i)) * 4 + k_inner] * vload2(0, B_shared + ((floormod_int32(i_inner_outer_j_inner_outer_fused, 4) * 2) + (k_inner * 8))))), 0, C_local + (i * 2));
            }
          }
          barrier(CLK_LOCAL_MEM_FENCE);
        }
        for (int i_inner_inner = 0; i_inner_inner < 2; ++i_inner_inner) {
          for (int j_inner_inner = 0; j_inner_inner < 2; ++j_inner_inner) {
            C[(((floordiv_int32(i_outer_j_outer_fused, 2) * 8) + ((floordiv_int32(i_inner_outer_j_inner_outer_fused, 4) * 2) + i_inner_inner))) * 16 + ((floormod_int32(i_outer_j_outer_fused, 2) * 8) + ((floormod_int32(i_inner_outer_j_inner_outer_fused, 4) * 2) + j_inner_inner))] = C_local[(i_inner_inner) * 2 + j_inner_inner];
          }
        }
      }
    }
  }
}
