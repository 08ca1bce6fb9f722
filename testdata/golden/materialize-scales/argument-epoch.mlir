// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'materialize-scales{epochs=arguments}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline simplify | filecheck %s --check-prefix SIMP
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'simplify{pack-scales=all}' | filecheck %s --check-prefix ALL

// materialize-scales{epochs=arguments}, which simplify runs last: only the scales computed
// from the function's arguments (an input's exponent, a step counter's bias correction) are
// packed, one vector that XLA:GPU computes in one kernel where it would otherwise give each
// rank-0 value that several tensor kernels read a kernel of its own (f32 mode, 1-layer GPT
// on an H100 target: 84 -> 57 fusions, the original 55). The epochs of statistics stay
// scalars: a pack after a reduction is one more kernel on XLA:GPU. simplify{pack-scales=all}
// (what Policy.for_target("cpu") runs) packs the reduction's epoch too.

// CHECK-LABEL: func.func public @arguments_only
// CHECK:         [[X:%.*]] = stablehlo.add %arg2, %arg2 : tensor<i32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.shift_left [[X]]
// CHECK-NEXT:    [[F:%.*]] = stablehlo.bitcast_convert [[S]] : (tensor<i32>) -> tensor<f32>
// CHECK:         [[I:%.*]] = stablehlo.bitcast_convert [[F]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.reshape [[I]] : (tensor<i32>) -> tensor<1xi32>
// CHECK-NEXT:    [[V:%.*]] = stablehlo.concatenate [[R]], [[R]], dim = 0
// CHECK-NEXT:    stablehlo.optimization_barrier [[V]] : tensor<2xi32>
// CHECK:         stablehlo.reduce
// CHECK-NOT:     stablehlo.optimization_barrier
// CHECK:         return
// SIMP-LABEL:  func.func public @arguments_only
// SIMP-COUNT-1:  stablehlo.optimization_barrier
// SIMP-NOT:      stablehlo.optimization_barrier
// SIMP:          return
// ALL-LABEL:   func.func public @arguments_only
// ALL-COUNT-2:   stablehlo.optimization_barrier
// ALL-NOT:       stablehlo.optimization_barrier
// ALL:           return
func.func public @arguments_only(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %x = stablehlo.add %arg2, %arg2 : tensor<i32>
  %s = stablehlo.shift_left %x, %c23 : tensor<i32>
  %f = stablehlo.bitcast_convert %s : (tensor<i32>) -> tensor<f32>
  %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %m1 = stablehlo.multiply %arg0, %fb : tensor<4xf32>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %abs = stablehlo.abs %arg1 : tensor<4xf32>
  %amax = stablehlo.reduce(%abs init: %cst) applies stablehlo.maximum across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %bits = stablehlo.bitcast_convert %amax : (tensor<f32>) -> tensor<i32>
  %e = stablehlo.shift_right_logical %bits, %c23 : tensor<i32>
  %s2 = stablehlo.shift_left %e, %c23 : tensor<i32>
  %f2 = stablehlo.bitcast_convert %s2 : (tensor<i32>) -> tensor<f32>
  %fb2 = stablehlo.broadcast_in_dim %f2, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %m2 = stablehlo.multiply %arg1, %fb2 : tensor<4xf32>
  %m3 = stablehlo.multiply %m1, %fb2 : tensor<4xf32>
  return %m1, %m2, %m3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// simplify{pack-scales=none} leaves them as scalars.

// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'simplify{pack-scales=none}' | filecheck %s --check-prefix OFF
// CHECK-LABEL: func.func public @off
// OFF-LABEL:   func.func public @off
// OFF-NOT:       stablehlo.optimization_barrier
// OFF:           return
func.func public @off(%arg0: tensor<4xf32>, %arg1: tensor<i32>) -> tensor<4xf32> {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %x = stablehlo.add %arg1, %arg1 : tensor<i32>
  %s = stablehlo.shift_left %x, %c23 : tensor<i32>
  %f = stablehlo.bitcast_convert %s : (tensor<i32>) -> tensor<f32>
  %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %m = stablehlo.multiply %arg0, %fb : tensor<4xf32>
  return %m : tensor<4xf32>
}
