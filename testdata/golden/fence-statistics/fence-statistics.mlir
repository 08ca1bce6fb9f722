// RUN: scalify-hlo rewrite %s --split-input-file --pipeline fence-statistics | filecheck %s

// A delayed step as scalify leaves it in `use` mode: the data applies the given exponent
// (the last argument), and the statistic it takes (a max over every dimension) only feeds
// the exponent handed on (the last result). The statistic goes into one
// optimization_barrier at the end, packed as a vector, and its arithmetic (rounding to an
// exponent, the zero case) moves below it, reading its element (a reshape: the vector has
// one). The data's own exponent arithmetic stays where it is.

// CHECK-LABEL: func.func @handed_on
// CHECK:         [[G:%.*]] = stablehlo.reshape %arg1
// CHECK:         [[MAX:%.*]] = stablehlo.reduce
// CHECK:         stablehlo.shift_left [[G]]
// CHECK:         [[DATA:%.*]] = stablehlo.multiply %arg0
// CHECK-NEXT:    [[P:%.*]] = stablehlo.reshape [[MAX]] : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT:    [[B:%.*]] = stablehlo.optimization_barrier [[P]] : tensor<1xf32>
// CHECK-NEXT:    [[M:%.*]] = stablehlo.reshape [[B]] : (tensor<1xf32>) -> tensor<f32>
// CHECK-NEXT:    [[BITS:%.*]] = stablehlo.bitcast_convert [[M]]
// CHECK-NEXT:    [[E:%.*]] = stablehlo.shift_right_logical [[BITS]]
// CHECK-NEXT:    [[ZERO:%.*]] = stablehlo.compare EQ, [[M]]
// CHECK-NEXT:    [[PICK:%.*]] = stablehlo.select [[ZERO]], [[G]], [[E]]
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
// barrier with it.

// CHECK-LABEL: func.func @one_of_two
// CHECK:         [[SUM:%.*]] = stablehlo.reduce({{.*}}) applies stablehlo.add
// CHECK:         [[MAX:%.*]] = stablehlo.reduce({{.*}}) applies stablehlo.maximum
// CHECK:         [[DATA:%.*]] = stablehlo.multiply %arg0
// CHECK:         [[P:%.*]] = stablehlo.reshape [[MAX]]
// CHECK-NEXT:    [[B:%.*]] = stablehlo.optimization_barrier [[P]] : tensor<1xf32>
// CHECK:         stablehlo.concatenate
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

// -----

// Statistics of two element types (maxima of f32 magnitudes, a max of i32 exponents): one
// packed vector of each through the barrier.

// CHECK-LABEL: func.func @two_types
// CHECK:         [[A:%.*]] = stablehlo.reshape {{%.*}} : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT:    [[C:%.*]] = stablehlo.reshape {{%.*}} : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT:    [[F:%.*]] = stablehlo.concatenate [[A]], [[C]], dim = 0 : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
// CHECK-NEXT:    [[I:%.*]] = stablehlo.reshape {{%.*}} : (tensor<i32>) -> tensor<1xi32>
// CHECK-NEXT:    [[B:%.*]]:2 = stablehlo.optimization_barrier [[F]], [[I]] : tensor<2xf32>, tensor<1xi32>
// CHECK-DAG:     stablehlo.slice [[B]]#0 [0:1]
// CHECK-DAG:     stablehlo.slice [[B]]#0 [1:2]
// CHECK-DAG:     stablehlo.reshape [[B]]#1 : (tensor<1xi32>) -> tensor<i32>
// CHECK:         return
func.func @two_types(%x: tensor<4x8xf32>, %y: tensor<8xf32>, %e: tensor<4xi32>) -> (tensor<4x8xf32>, tensor<3xi32>) attributes {scalify.delayed_exponents = 3 : i64} {
  %c23 = stablehlo.constant dense<23> : tensor<i32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %low = stablehlo.constant dense<-1000> : tensor<i32>
  %ax = stablehlo.abs %x : tensor<4x8xf32>
  %mx = stablehlo.reduce(%ax init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
  %ay = stablehlo.abs %y : tensor<8xf32>
  %my = stablehlo.reduce(%ay init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
  %me = stablehlo.reduce(%e init: %low) applies stablehlo.maximum across dimensions = [0] : (tensor<4xi32>, tensor<i32>) -> tensor<i32>
  %bx = stablehlo.bitcast_convert %mx : (tensor<f32>) -> tensor<i32>
  %ex = stablehlo.shift_right_logical %bx, %c23 : tensor<i32>
  %by = stablehlo.bitcast_convert %my : (tensor<f32>) -> tensor<i32>
  %ey = stablehlo.shift_right_logical %by, %c23 : tensor<i32>
  %v0 = stablehlo.reshape %ex : (tensor<i32>) -> tensor<1xi32>
  %v1 = stablehlo.reshape %ey : (tensor<i32>) -> tensor<1xi32>
  %v2 = stablehlo.reshape %me : (tensor<i32>) -> tensor<1xi32>
  %v = stablehlo.concatenate %v0, %v1, %v2, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
  return %x, %v : tensor<4x8xf32>, tensor<3xi32>
}
