// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16},simplify{pack-scales=none}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=bf16},simplify{pack-scales=none}' | filecheck %s

// A lookup in a rank-1 constant table (a diffusion model's alpha_bar per timestep) keeps f32
// data with 16-bit data, and so does what is computed from it with constants alone: 16 bits
// round 0.9999 to 1, and sqrt(1 - ab), the noise's coefficient, was 0 where it is 0.01. The
// table is made in f32, the gather, the subtraction and the sqrts run in f32; the products
// with the data tensors read the coefficients converted and stay 16-bit.

// CHECK-LABEL: func.func public @main
// CHECK:         [[TABLE:%.*]] = stablehlo.constant dense<[{{.*}}]> : tensor<4xf32>
// CHECK:         [[AB:%.*]] = "stablehlo.gather"([[TABLE]], {{%.*}}) {{.*}} -> tensor<2xf32>
// CHECK:         stablehlo.sqrt {{%.*}} : tensor<2x1xf32>
// CHECK:         stablehlo.subtract {{%.*}} : tensor<2x1xf32>
// CHECK:         stablehlo.sqrt {{%.*}} : tensor<2x1xf32>
// CHECK:         stablehlo.multiply {{%.*}} : tensor<2x4x{{b?}}f16>
func.func public @main(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>, %arg2: tensor<2xi32>) -> tensor<2x4xf32> {
  %cst = stablehlo.constant dense<[0.999899983, 9.997000e-01, 9.990000e-01, 9.900000e-01]> : tensor<4xf32>
  %0 = stablehlo.broadcast_in_dim %arg2, dims = [0] : (tensor<2xi32>) -> tensor<2x1xi32>
  %1 = "stablehlo.gather"(%cst, %0) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1>}> : (tensor<4xf32>, tensor<2x1xi32>) -> tensor<2xf32>
  %2 = stablehlo.broadcast_in_dim %1, dims = [0] : (tensor<2xf32>) -> tensor<2x1xf32>
  %3 = stablehlo.sqrt %2 : tensor<2x1xf32>
  %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<2x1xf32>) -> tensor<2x4xf32>
  %5 = stablehlo.multiply %4, %arg0 : tensor<2x4xf32>
  %cst_1 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
  %6 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x1xf32>
  %7 = stablehlo.subtract %6, %2 : tensor<2x1xf32>
  %8 = stablehlo.sqrt %7 : tensor<2x1xf32>
  %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1] : (tensor<2x1xf32>) -> tensor<2x4xf32>
  %10 = stablehlo.multiply %9, %arg1 : tensor<2x4xf32>
  %11 = stablehlo.add %5, %10 : tensor<2x4xf32>
  return %11 : tensor<2x4xf32>
}

// -----

// A learning-rate table indexed by a scalar step (dynamic_slice): the slice and its rank-0
// element stay f32 with the table.

// CHECK-LABEL: func.func public @main
// CHECK:         [[TABLE:%.*]] = stablehlo.constant dense<[{{.*}}]> : tensor<4xf32>
// CHECK:         stablehlo.dynamic_slice [[TABLE]], {{%.*}}, sizes = [1] : (tensor<4xf32>, tensor<i32>) -> tensor<1xf32>
func.func public @main(%arg0: tensor<8xf32>, %arg1: tensor<i32>) -> tensor<8xf32> {
  %cst = stablehlo.constant dense<[1.000000e-03, 9.990000e-04, 9.980000e-04, 9.970000e-04]> : tensor<4xf32>
  %0 = stablehlo.dynamic_slice %cst, %arg1, sizes = [1] : (tensor<4xf32>, tensor<i32>) -> tensor<1xf32>
  %1 = stablehlo.reshape %0 : (tensor<1xf32>) -> tensor<f32>
  %2 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<f32>) -> tensor<8xf32>
  %3 = stablehlo.multiply %2, %arg0 : tensor<8xf32>
  return %3 : tensor<8xf32>
}
