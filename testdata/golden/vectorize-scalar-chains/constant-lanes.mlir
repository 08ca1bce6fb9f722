// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'vectorize-scalar-chains{max-gather=1}' | filecheck %s

// Each lane clamps its exponent to bounds of its own (constants): with a gather allowed for
// no bundle (max-gather=1), the bounds are still one dense constant vector each, so the
// clamp and the chain after it run once on the vector.

// CHECK-LABEL: func.func @bounds_per_lane
// CHECK-DAG:     [[LO:%.*]] = stablehlo.constant dense<[-126, -127, -126]> : tensor<3xi32>
// CHECK-DAG:     [[HI:%.*]] = stablehlo.constant dense<[126, 127, 127]> : tensor<3xi32>
// CHECK:         [[C:%.*]] = stablehlo.clamp [[LO]], %arg0, [[HI]] : tensor<3xi32>
// CHECK:         stablehlo.negate [[C]] : tensor<3xi32>
// CHECK-NOT:     stablehlo.concatenate
// CHECK-NOT:     : tensor<i32>
// CHECK:         return
func.func @bounds_per_lane(%e: tensor<3xi32>) -> tensor<3xi32> {
  %lo0 = stablehlo.constant dense<-126> : tensor<i32>
  %lo1 = stablehlo.constant dense<-127> : tensor<i32>
  %hi0 = stablehlo.constant dense<126> : tensor<i32>
  %hi1 = stablehlo.constant dense<127> : tensor<i32>
  %s0 = stablehlo.slice %e [0:1] : (tensor<3xi32>) -> tensor<1xi32>
  %e0 = stablehlo.reshape %s0 : (tensor<1xi32>) -> tensor<i32>
  %c0 = stablehlo.clamp %lo0, %e0, %hi0 : tensor<i32>
  %n0 = stablehlo.negate %c0 : tensor<i32>
  %s1 = stablehlo.slice %e [1:2] : (tensor<3xi32>) -> tensor<1xi32>
  %e1 = stablehlo.reshape %s1 : (tensor<1xi32>) -> tensor<i32>
  %c1 = stablehlo.clamp %lo1, %e1, %hi1 : tensor<i32>
  %n1 = stablehlo.negate %c1 : tensor<i32>
  %s2 = stablehlo.slice %e [2:3] : (tensor<3xi32>) -> tensor<1xi32>
  %e2 = stablehlo.reshape %s2 : (tensor<1xi32>) -> tensor<i32>
  %c2 = stablehlo.clamp %lo0, %e2, %hi1 : tensor<i32>
  %n2 = stablehlo.negate %c2 : tensor<i32>
  %r0 = stablehlo.reshape %n0 : (tensor<i32>) -> tensor<1xi32>
  %r1 = stablehlo.reshape %n1 : (tensor<i32>) -> tensor<1xi32>
  %r2 = stablehlo.reshape %n2 : (tensor<i32>) -> tensor<1xi32>
  %v = stablehlo.concatenate %r0, %r1, %r2, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
  return %v : tensor<3xi32>
}

// -----

// f32 factors per lane (constants) multiply the lanes: one f32 constant vector. A lane
// operand that is no constant (an argument) would need a gather, which max-gather=1 forbids:
// those adds stay scalar.

// CHECK-LABEL: func.func @float_constants_and_a_gather
// CHECK-DAG:     [[K:%.*]] = stablehlo.constant dense<[2.500000e-01, 5.000000e-01]> : tensor<2xf32>
// CHECK:         [[M:%.*]] = stablehlo.multiply %arg0, [[K]] : tensor<2xf32>
// CHECK:         stablehlo.add {{.*}}, %arg1 : tensor<f32>
// CHECK:         stablehlo.add {{.*}}, %arg2 : tensor<f32>
func.func @float_constants_and_a_gather(%x: tensor<2xf32>, %a: tensor<f32>, %b: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  %k0 = stablehlo.constant dense<0.25> : tensor<f32>
  %k1 = stablehlo.constant dense<0.5> : tensor<f32>
  %s0 = stablehlo.slice %x [0:1] : (tensor<2xf32>) -> tensor<1xf32>
  %x0 = stablehlo.reshape %s0 : (tensor<1xf32>) -> tensor<f32>
  %m0 = stablehlo.multiply %x0, %k0 : tensor<f32>
  %y0 = stablehlo.add %m0, %a : tensor<f32>
  %s1 = stablehlo.slice %x [1:2] : (tensor<2xf32>) -> tensor<1xf32>
  %x1 = stablehlo.reshape %s1 : (tensor<1xf32>) -> tensor<f32>
  %m1 = stablehlo.multiply %x1, %k1 : tensor<f32>
  %y1 = stablehlo.add %m1, %b : tensor<f32>
  return %y0, %y1 : tensor<f32>, tensor<f32>
}

// -----

// Booleans per lane are no dense vector this pass writes: a select on per-lane i1 constants
// stays scalar when no gather is allowed.

// CHECK-LABEL: func.func @boolean_lanes_stay
// CHECK-COUNT-2: stablehlo.select {{.*}} : tensor<i1>, tensor<i32>
func.func @boolean_lanes_stay(%e: tensor<2xi32>, %k: tensor<i32>) -> (tensor<i32>, tensor<i32>) {
  %t = stablehlo.constant dense<true> : tensor<i1>
  %f = stablehlo.constant dense<false> : tensor<i1>
  %s0 = stablehlo.slice %e [0:1] : (tensor<2xi32>) -> tensor<1xi32>
  %e0 = stablehlo.reshape %s0 : (tensor<1xi32>) -> tensor<i32>
  %y0 = stablehlo.select %t, %e0, %k : tensor<i1>, tensor<i32>
  %s1 = stablehlo.slice %e [1:2] : (tensor<2xi32>) -> tensor<1xi32>
  %e1 = stablehlo.reshape %s1 : (tensor<1xi32>) -> tensor<i32>
  %y1 = stablehlo.select %f, %e1, %k : tensor<i1>, tensor<i32>
  return %y0, %y1 : tensor<i32>, tensor<i32>
}

// -----

// 64-bit integers do not survive the trip through a Python float the constants' values
// take: per-lane i64 constants stay scalar when no gather is allowed.

// CHECK-LABEL: func.func @wide_integer_lanes_stay
// CHECK-COUNT-2: stablehlo.add {{.*}} : tensor<i64>
func.func @wide_integer_lanes_stay(%e: tensor<2xi64>) -> (tensor<i64>, tensor<i64>) {
  %k0 = stablehlo.constant dense<9007199254740993> : tensor<i64>
  %k1 = stablehlo.constant dense<1> : tensor<i64>
  %s0 = stablehlo.slice %e [0:1] : (tensor<2xi64>) -> tensor<1xi64>
  %e0 = stablehlo.reshape %s0 : (tensor<1xi64>) -> tensor<i64>
  %y0 = stablehlo.add %e0, %k0 : tensor<i64>
  %s1 = stablehlo.slice %e [1:2] : (tensor<2xi64>) -> tensor<1xi64>
  %e1 = stablehlo.reshape %s1 : (tensor<1xi64>) -> tensor<i64>
  %y1 = stablehlo.add %e1, %k1 : tensor<i64>
  return %y0, %y1 : tensor<i64>, tensor<i64>
}
