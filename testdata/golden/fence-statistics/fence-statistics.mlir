// RUN: scalify-hlo rewrite %s --split-input-file --pipeline fence-statistics | filecheck %s

// A delayed step as scalify leaves it in `use` mode: the data applies the given exponent
// (the last argument), and the statistic it takes (a max over every dimension) only feeds
// the exponent handed on (the last result). The statistic goes into one
// optimization_barrier at the end, and its arithmetic (rounding to an exponent, the zero
// case) moves below it; the given exponent that the zero case falls back to passes through
// the barrier too, so that nothing below it shares an operand with the data's exponent
// arithmetic (which stays where it is).

// CHECK-LABEL: func.func @handed_on
// CHECK:         [[G:%.*]] = stablehlo.reshape %arg1
// CHECK:         [[MAX:%.*]] = stablehlo.reduce
// CHECK:         stablehlo.shift_left [[G]]
// CHECK:         [[DATA:%.*]] = stablehlo.multiply %arg0
// CHECK-NEXT:    [[B:%.*]]:2 = stablehlo.optimization_barrier [[MAX]], [[G]] : tensor<f32>, tensor<i32>
// CHECK-NEXT:    [[BITS:%.*]] = stablehlo.bitcast_convert [[B]]#0
// CHECK-NEXT:    [[E:%.*]] = stablehlo.shift_right_logical [[BITS]]
// CHECK-NEXT:    [[ZERO:%.*]] = stablehlo.compare EQ, [[B]]#0
// CHECK-NEXT:    [[PICK:%.*]] = stablehlo.select [[ZERO]], [[B]]#1, [[E]]
// CHECK-NEXT:    [[V:%.*]] = stablehlo.reshape [[PICK]]
// CHECK-NEXT:    return [[DATA]], [[V]]
func.func @handed_on(%x: tensor<4x8xf32>, %given: tensor<1xi32>) -> (tensor<4x8xf32>, tensor<1xi32>) attributes {scalify.delayed_exponents = 1 : i64} {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %g = stablehlo.reshape %given : (tensor<1xi32>) -> tensor<i32>
  %abs = stablehlo.abs %x : tensor<4x8xf32>
  %max = stablehlo.reduce(%abs init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
  %bits = stablehlo.bitcast_convert %max : (tensor<f32>) -> tensor<i32>
  %e = stablehlo.shift_right_logical %bits, %c23 : tensor<i32>
  %shifted = stablehlo.shift_left %g, %c23 : tensor<i32>
  %f = stablehlo.bitcast_convert %shifted : (tensor<i32>) -> tensor<f32>
  %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %data = stablehlo.multiply %x, %fb : tensor<4x8xf32>
  %is_zero = stablehlo.compare EQ, %max, %zero : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %pick = stablehlo.select %is_zero, %g, %e : tensor<i1>, tensor<i32>
  %v = stablehlo.reshape %pick : (tensor<i32>) -> tensor<1xi32>
  return %data, %v : tensor<4x8xf32>, tensor<1xi32>
}

// -----

// `measure` mode: the data applies the exponent it measures, so the statistic stays where
// it is (fenced, the data would wait for the end of the function: a cycle).

// CHECK-LABEL: func.func @applied
// CHECK-NOT:     stablehlo.optimization_barrier
// CHECK:         return
func.func @applied(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<1xi32>) attributes {scalify.delayed_exponents = 1 : i64} {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %abs = stablehlo.abs %x : tensor<4x8xf32>
  %max = stablehlo.reduce(%abs init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
  %bits = stablehlo.bitcast_convert %max : (tensor<f32>) -> tensor<i32>
  %e = stablehlo.shift_right_logical %bits, %c23 : tensor<i32>
  %shifted = stablehlo.shift_left %e, %c23 : tensor<i32>
  %f = stablehlo.bitcast_convert %shifted : (tensor<i32>) -> tensor<f32>
  %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %data = stablehlo.multiply %x, %fb : tensor<4x8xf32>
  %v = stablehlo.reshape %e : (tensor<i32>) -> tensor<1xi32>
  return %data, %v : tensor<4x8xf32>, tensor<1xi32>
}

// -----

// Two statistics, one of them also applied (a point inside a loop, say, or a sum some data
// reads): only the other is fenced, and the concatenate of both exponents moves below the
// barrier with it, the applied one's exponent passing through the barrier.

// CHECK-LABEL: func.func @one_of_two
// CHECK:         [[SUM:%.*]] = stablehlo.reduce({{.*}}) applies stablehlo.add
// CHECK:         [[MAX:%.*]] = stablehlo.reduce({{.*}}) applies stablehlo.maximum
// CHECK:         [[DATA:%.*]] = stablehlo.multiply %arg0
// CHECK:         [[V0:%.*]] = stablehlo.reshape
// CHECK-NEXT:    [[B:%.*]]:2 = stablehlo.optimization_barrier [[MAX]], [[V0]] : tensor<f32>, tensor<1xi32>
// CHECK-NEXT:    [[BITS:%.*]] = stablehlo.bitcast_convert [[B]]#0
// CHECK:         stablehlo.concatenate [[B]]#1,
// CHECK-NEXT:    return [[DATA]]
func.func @one_of_two(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<2xi32>) attributes {scalify.delayed_exponents = 2 : i64} {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
  %abs = stablehlo.abs %x : tensor<4x8xf32>
  %max = stablehlo.reduce(%abs init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
  %sb = stablehlo.bitcast_convert %sum : (tensor<f32>) -> tensor<i32>
  %se = stablehlo.shift_right_logical %sb, %c23 : tensor<i32>
  %fb = stablehlo.broadcast_in_dim %sum, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %data = stablehlo.multiply %x, %fb : tensor<4x8xf32>
  %bits = stablehlo.bitcast_convert %max : (tensor<f32>) -> tensor<i32>
  %e = stablehlo.shift_right_logical %bits, %c23 : tensor<i32>
  %v0 = stablehlo.reshape %se : (tensor<i32>) -> tensor<1xi32>
  %v1 = stablehlo.reshape %e : (tensor<i32>) -> tensor<1xi32>
  %v = stablehlo.concatenate %v0, %v1, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  return %data, %v : tensor<4x8xf32>, tensor<2xi32>
}

// -----

// No delayed exponents (no `scalify.delayed_exponents`): nothing changes.

// CHECK-LABEL: func.func @not_delayed
// CHECK-NOT:     stablehlo.optimization_barrier
// CHECK:         return
func.func @not_delayed(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<f32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %abs = stablehlo.abs %x : tensor<4x8xf32>
  %max = stablehlo.reduce(%abs init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
  return %x, %max : tensor<4x8xf32>, tensor<f32>
}
