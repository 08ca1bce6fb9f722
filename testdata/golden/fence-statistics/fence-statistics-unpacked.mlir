// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fence-statistics{packed=false}' | filecheck %s

// packed=false (what simplify{pack-scales=none} runs, the TPU targets): the statistics go
// through the barrier as the scalars they are, one operand each, and their arithmetic
// reads the barrier's results directly (no vector, no slices: XLA:TPU copies each element
// of a vector out into a scalar buffer in a kernel of its own).

// CHECK-LABEL: func.func @scalars
// CHECK:         [[MA:%.*]] = stablehlo.reduce
// CHECK:         [[MB:%.*]] = stablehlo.reduce
// CHECK-NOT:     stablehlo.concatenate
// CHECK:         [[B:%.*]]:2 = stablehlo.optimization_barrier [[MA]], [[MB]] : tensor<f32>, tensor<f32>
// CHECK-NEXT:    [[BA:%.*]] = stablehlo.bitcast_convert [[B]]#0
// CHECK:         [[BB:%.*]] = stablehlo.bitcast_convert [[B]]#1
// CHECK-NOT:     stablehlo.slice
// CHECK:         return
func.func @scalars(%x: tensor<4x8xf32>, %y: tensor<16xf32>, %given: tensor<2xi32>) -> (tensor<4x8xf32>, tensor<2xi32>) attributes {scalify.delayed_exponents = 2 : i64} {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %g0 = stablehlo.slice %given [0:1] : (tensor<2xi32>) -> tensor<1xi32>
  %g = stablehlo.reshape %g0 : (tensor<1xi32>) -> tensor<i32>
  %abs = stablehlo.abs %x : tensor<4x8xf32>
  %max = stablehlo.reduce(%abs init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
  %absy = stablehlo.abs %y : tensor<16xf32>
  %maxy = stablehlo.reduce(%absy init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<16xf32>, tensor<f32>) -> tensor<f32>
  %shifted = stablehlo.shift_left %g, %c23 : tensor<i32>
  %f = stablehlo.bitcast_convert %shifted : (tensor<i32>) -> tensor<f32>
  %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %data = stablehlo.multiply %x, %fb : tensor<4x8xf32>
  %bits = stablehlo.bitcast_convert %max : (tensor<f32>) -> tensor<i32>
  %e = stablehlo.shift_right_logical %bits, %c23 : tensor<i32>
  %bitsy = stablehlo.bitcast_convert %maxy : (tensor<f32>) -> tensor<i32>
  %ey = stablehlo.shift_right_logical %bitsy, %c23 : tensor<i32>
  %v0 = stablehlo.reshape %e : (tensor<i32>) -> tensor<1xi32>
  %v1 = stablehlo.reshape %ey : (tensor<i32>) -> tensor<1xi32>
  %v = stablehlo.concatenate %v0, %v1, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  return %data, %v : tensor<4x8xf32>, tensor<2xi32>
}

// -----

// A vector of statistics (slice-statistics' amaxes of a tensor's pieces) goes through the
// barrier whole, and its elements are read below it.

// CHECK-LABEL: func.func @pieces
// CHECK:         [[V:%.*]] = stablehlo.reduce
// CHECK-SAME:    -> tensor<2xf32>
// CHECK-NEXT:    [[B:%.*]] = stablehlo.optimization_barrier [[V]] : tensor<2xf32>
// CHECK-NEXT:    stablehlo.slice [[B]] [0:1]
// CHECK:         stablehlo.slice [[B]] [1:2]
// CHECK:         return
func.func @pieces(%x: tensor<4x8xf32>) -> tensor<2xi32> attributes {scalify.delayed_exponents = 2 : i64} {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %split = stablehlo.reshape %x : (tensor<4x8xf32>) -> tensor<4x2x4xf32>
  %abs = stablehlo.abs %split : tensor<4x2x4xf32>
  %max = stablehlo.reduce(%abs init: %zero) applies stablehlo.maximum across dimensions = [0, 2] : (tensor<4x2x4xf32>, tensor<f32>) -> tensor<2xf32>
  %s0 = stablehlo.slice %max [0:1] : (tensor<2xf32>) -> tensor<1xf32>
  %m0 = stablehlo.reshape %s0 : (tensor<1xf32>) -> tensor<f32>
  %s1 = stablehlo.slice %max [1:2] : (tensor<2xf32>) -> tensor<1xf32>
  %m1 = stablehlo.reshape %s1 : (tensor<1xf32>) -> tensor<f32>
  %b0 = stablehlo.bitcast_convert %m0 : (tensor<f32>) -> tensor<i32>
  %e0 = stablehlo.shift_right_logical %b0, %c23 : tensor<i32>
  %b1 = stablehlo.bitcast_convert %m1 : (tensor<f32>) -> tensor<i32>
  %e1 = stablehlo.shift_right_logical %b1, %c23 : tensor<i32>
  %v0 = stablehlo.reshape %e0 : (tensor<i32>) -> tensor<1xi32>
  %v1 = stablehlo.reshape %e1 : (tensor<i32>) -> tensor<1xi32>
  %v = stablehlo.concatenate %v0, %v1, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  return %v : tensor<2xi32>
}
