// RUN: scalify-hlo rewrite %s --pipeline 'materialize-scales{epochs=arguments}' | filecheck %s
// RUN: scalify-hlo rewrite %s --pipeline 'materialize-scales{epochs=arguments pack-width=2}' | filecheck %s --check-prefix TWO
// RUN: scalify-hlo rewrite %s --pipeline 'simplify{pack-width=2}' | filecheck %s --check-prefix TWO

// pack-width: how many scalars one packed vector holds. The default, 8, is XLA:CPU's (a
// concatenate of more operands runs there as a kernel per operand); XLA:GPU runs a pack of
// up to about 80 as one kernel, so Policy.for_target gives GPUs 64. Three argument-epoch
// factors: one vector of 3 by default; with pack-width=2, a vector of 2 and one of the last
// factor twice (a vector has at least two elements: XLA folds the slice of a one-element
// vector back into its scalar chain), all behind one barrier.

// CHECK-LABEL: func.func public @three_factors
// CHECK:         [[V:%.*]] = stablehlo.concatenate {{%.*}}, {{%.*}}, {{%.*}}, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
// CHECK-NEXT:    stablehlo.optimization_barrier [[V]] : tensor<3xi32>
// CHECK-NOT:     stablehlo.optimization_barrier
// TWO-LABEL:   func.func public @three_factors
// TWO:           [[V1:%.*]] = stablehlo.concatenate {{%.*}}, {{%.*}}, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
// TWO:           [[R:%.*]] = stablehlo.reshape {{%.*}} : (tensor<i32>) -> tensor<1xi32>
// TWO-NEXT:      [[V2:%.*]] = stablehlo.concatenate [[R]], [[R]], dim = 0
// TWO-NEXT:      stablehlo.optimization_barrier [[V1]], [[V2]] : tensor<2xi32>, tensor<2xi32>
// TWO-NOT:       stablehlo.optimization_barrier
func.func public @three_factors(%arg0: tensor<4xf32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %x1 = stablehlo.add %arg1, %arg1 : tensor<i32>
  %s1 = stablehlo.shift_left %x1, %c23 : tensor<i32>
  %f1 = stablehlo.bitcast_convert %s1 : (tensor<i32>) -> tensor<f32>
  %b1 = stablehlo.broadcast_in_dim %f1, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %m1 = stablehlo.multiply %arg0, %b1 : tensor<4xf32>
  %x2 = stablehlo.add %arg2, %arg2 : tensor<i32>
  %s2 = stablehlo.shift_left %x2, %c23 : tensor<i32>
  %f2 = stablehlo.bitcast_convert %s2 : (tensor<i32>) -> tensor<f32>
  %b2 = stablehlo.broadcast_in_dim %f2, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %m2 = stablehlo.multiply %arg0, %b2 : tensor<4xf32>
  %x3 = stablehlo.add %arg3, %arg3 : tensor<i32>
  %s3 = stablehlo.shift_left %x3, %c23 : tensor<i32>
  %f3 = stablehlo.bitcast_convert %s3 : (tensor<i32>) -> tensor<f32>
  %b3 = stablehlo.broadcast_in_dim %f3, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %m3 = stablehlo.multiply %arg0, %b3 : tensor<4xf32>
  return %m1, %m2, %m3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
