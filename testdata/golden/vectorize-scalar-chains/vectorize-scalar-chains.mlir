// RUN: scalify-hlo rewrite %s --split-input-file --pipeline vectorize-scalar-chains | filecheck %s

// 2**-e of each of four exponents (clamp, negate, bias, shift, bitcast), the results
// concatenated in order: one op per step on the vector, and the concatenate is the result.

// CHECK-LABEL: func.func @powers_of_two
// CHECK:         [[C:%.*]] = stablehlo.clamp {{.*}}, %arg0, {{.*}} : tensor<4xi32>
// CHECK:         stablehlo.negate [[C]] : tensor<4xi32>
// CHECK:         stablehlo.add {{.*}} : tensor<4xi32>
// CHECK:         stablehlo.shift_left {{.*}} : tensor<4xi32>
// CHECK:         [[B:%.*]] = stablehlo.bitcast_convert {{.*}} : (tensor<4xi32>) -> tensor<4xf32>
// CHECK-NOT:     stablehlo.concatenate
// CHECK:         return [[B]] : tensor<4xf32>
func.func @powers_of_two(%e: tensor<4xi32>) -> tensor<4xf32> {
  %lo = stablehlo.constant dense<-126> : tensor<i32>
  %hi = stablehlo.constant dense<127> : tensor<i32>
  %bias = stablehlo.constant dense<127> : tensor<i32>
  %mantissa = stablehlo.constant dense<23> : tensor<i32>
  %s0 = stablehlo.slice %e [0:1] : (tensor<4xi32>) -> tensor<1xi32>
  %e0 = stablehlo.reshape %s0 : (tensor<1xi32>) -> tensor<i32>
  %c0 = stablehlo.clamp %lo, %e0, %hi : tensor<i32>
  %n0 = stablehlo.negate %c0 : tensor<i32>
  %a0 = stablehlo.add %n0, %bias : tensor<i32>
  %h0 = stablehlo.shift_left %a0, %mantissa : tensor<i32>
  %f0 = stablehlo.bitcast_convert %h0 : (tensor<i32>) -> tensor<f32>
  %s1 = stablehlo.slice %e [1:2] : (tensor<4xi32>) -> tensor<1xi32>
  %e1 = stablehlo.reshape %s1 : (tensor<1xi32>) -> tensor<i32>
  %c1 = stablehlo.clamp %lo, %e1, %hi : tensor<i32>
  %n1 = stablehlo.negate %c1 : tensor<i32>
  %a1 = stablehlo.add %n1, %bias : tensor<i32>
  %h1 = stablehlo.shift_left %a1, %mantissa : tensor<i32>
  %f1 = stablehlo.bitcast_convert %h1 : (tensor<i32>) -> tensor<f32>
  %s2 = stablehlo.slice %e [2:3] : (tensor<4xi32>) -> tensor<1xi32>
  %e2 = stablehlo.reshape %s2 : (tensor<1xi32>) -> tensor<i32>
  %c2 = stablehlo.clamp %lo, %e2, %hi : tensor<i32>
  %n2 = stablehlo.negate %c2 : tensor<i32>
  %a2 = stablehlo.add %n2, %bias : tensor<i32>
  %h2 = stablehlo.shift_left %a2, %mantissa : tensor<i32>
  %f2 = stablehlo.bitcast_convert %h2 : (tensor<i32>) -> tensor<f32>
  %s3 = stablehlo.slice %e [3:4] : (tensor<4xi32>) -> tensor<1xi32>
  %e3 = stablehlo.reshape %s3 : (tensor<1xi32>) -> tensor<i32>
  %c3 = stablehlo.clamp %lo, %e3, %hi : tensor<i32>
  %n3 = stablehlo.negate %c3 : tensor<i32>
  %a3 = stablehlo.add %n3, %bias : tensor<i32>
  %h3 = stablehlo.shift_left %a3, %mantissa : tensor<i32>
  %f3 = stablehlo.bitcast_convert %h3 : (tensor<i32>) -> tensor<f32>
  %r0 = stablehlo.reshape %f0 : (tensor<f32>) -> tensor<1xf32>
  %r1 = stablehlo.reshape %f1 : (tensor<f32>) -> tensor<1xf32>
  %r2 = stablehlo.reshape %f2 : (tensor<f32>) -> tensor<1xf32>
  %r3 = stablehlo.reshape %f3 : (tensor<f32>) -> tensor<1xf32>
  %v = stablehlo.concatenate %r0, %r1, %r2, %r3, dim = 0 : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4xf32>
  return %v : tensor<4xf32>
}

// -----

// Each statistic's zero case hands on a value of its own (an argument here): those become a
// vector of the lanes' scalars; the compare's constant is the same for every lane (a
// broadcast). The scalar results are read back element by element where they are used.

// CHECK-LABEL: func.func @per_lane_operand
// CHECK-DAG:     [[Z:%.*]] = stablehlo.compare EQ, %arg0, {{.*}} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
// CHECK-DAG:     [[F:%.*]] = stablehlo.concatenate {{.*}}, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
// CHECK:         [[S:%.*]] = stablehlo.select [[Z]], [[F]], {{.*}} : tensor<2xi1>, tensor<2xi32>
// CHECK:         stablehlo.slice [[S]] [0:1]
// CHECK:         stablehlo.slice [[S]] [1:2]
// CHECK-NOT:     stablehlo.select
func.func @per_lane_operand(%stats: tensor<2xf32>, %given0: tensor<i32>, %given1: tensor<i32>, %e: tensor<i32>) -> (tensor<i32>, tensor<i32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s0 = stablehlo.slice %stats [0:1] : (tensor<2xf32>) -> tensor<1xf32>
  %x0 = stablehlo.reshape %s0 : (tensor<1xf32>) -> tensor<f32>
  %z0 = stablehlo.compare EQ, %x0, %zero : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %y0 = stablehlo.select %z0, %given0, %e : tensor<i1>, tensor<i32>
  %s1 = stablehlo.slice %stats [1:2] : (tensor<2xf32>) -> tensor<1xf32>
  %x1 = stablehlo.reshape %s1 : (tensor<1xf32>) -> tensor<f32>
  %z1 = stablehlo.compare EQ, %x1, %zero : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %y1 = stablehlo.select %z1, %given1, %e : tensor<i1>, tensor<i32>
  return %y0, %y1 : tensor<i32>, tensor<i32>
}

// -----

// The second lane's op reads a value made after the first lane's op: a vector op before the
// first would read it before it exists, so both stay scalar. The ops before it still go.

// CHECK-LABEL: func.func @operand_made_later
// CHECK:         stablehlo.negate %arg0 : tensor<2xi32>
// CHECK:         stablehlo.add {{.*}} : tensor<i32>
// CHECK:         stablehlo.add {{.*}} : tensor<i32>
func.func @operand_made_later(%e: tensor<2xi32>, %k: tensor<i32>) -> (tensor<i32>, tensor<i32>) {
  %s0 = stablehlo.slice %e [0:1] : (tensor<2xi32>) -> tensor<1xi32>
  %e0 = stablehlo.reshape %s0 : (tensor<1xi32>) -> tensor<i32>
  %n0 = stablehlo.negate %e0 : tensor<i32>
  %a0 = stablehlo.add %n0, %k : tensor<i32>
  %later = stablehlo.multiply %a0, %k : tensor<i32>
  %s1 = stablehlo.slice %e [1:2] : (tensor<2xi32>) -> tensor<1xi32>
  %e1 = stablehlo.reshape %s1 : (tensor<1xi32>) -> tensor<i32>
  %n1 = stablehlo.negate %e1 : tensor<i32>
  %a1 = stablehlo.add %n1, %later : tensor<i32>
  return %a0, %a1 : tensor<i32>, tensor<i32>
}

// -----

// Different ops on the two lanes, and two reads of a 64-element vector (too few of its
// lanes for a vector op on all of them): nothing changes.

// CHECK-LABEL: func.func @nothing_to_bundle
// CHECK:         stablehlo.negate {{.*}} : tensor<i32>
// CHECK:         stablehlo.abs {{.*}} : tensor<i32>
// CHECK:         stablehlo.negate {{.*}} : tensor<i32>
// CHECK:         stablehlo.negate {{.*}} : tensor<i32>
// CHECK-NOT:     stablehlo.concatenate
func.func @nothing_to_bundle(%e: tensor<2xi32>, %long: tensor<64xi32>) -> (tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) {
  %s0 = stablehlo.slice %e [0:1] : (tensor<2xi32>) -> tensor<1xi32>
  %e0 = stablehlo.reshape %s0 : (tensor<1xi32>) -> tensor<i32>
  %n0 = stablehlo.negate %e0 : tensor<i32>
  %s1 = stablehlo.slice %e [1:2] : (tensor<2xi32>) -> tensor<1xi32>
  %e1 = stablehlo.reshape %s1 : (tensor<1xi32>) -> tensor<i32>
  %n1 = stablehlo.abs %e1 : tensor<i32>
  %l0 = stablehlo.slice %long [0:1] : (tensor<64xi32>) -> tensor<1xi32>
  %x0 = stablehlo.reshape %l0 : (tensor<1xi32>) -> tensor<i32>
  %y0 = stablehlo.negate %x0 : tensor<i32>
  %l1 = stablehlo.slice %long [1:2] : (tensor<64xi32>) -> tensor<1xi32>
  %x1 = stablehlo.reshape %l1 : (tensor<1xi32>) -> tensor<i32>
  %y1 = stablehlo.negate %x1 : tensor<i32>
  return %n0, %n1, %y0, %y1 : tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>
}

// -----

// Results of lanes 1 and 2 concatenated with another value: the two become one slice of the
// vector op's result.

// CHECK-LABEL: func.func @part_of_the_vector
// CHECK:         [[N:%.*]] = stablehlo.negate %arg0 : tensor<4xi32>
// CHECK:         [[P:%.*]] = stablehlo.slice [[N]] [1:3] : (tensor<4xi32>) -> tensor<2xi32>
// CHECK:         stablehlo.concatenate [[P]], %arg1, dim = 0 : (tensor<2xi32>, tensor<1xi32>) -> tensor<3xi32>
func.func @part_of_the_vector(%e: tensor<4xi32>, %other: tensor<1xi32>) -> tensor<3xi32> {
  %s1 = stablehlo.slice %e [1:2] : (tensor<4xi32>) -> tensor<1xi32>
  %e1 = stablehlo.reshape %s1 : (tensor<1xi32>) -> tensor<i32>
  %n1 = stablehlo.negate %e1 : tensor<i32>
  %s2 = stablehlo.slice %e [2:3] : (tensor<4xi32>) -> tensor<1xi32>
  %e2 = stablehlo.reshape %s2 : (tensor<1xi32>) -> tensor<i32>
  %n2 = stablehlo.negate %e2 : tensor<i32>
  %r1 = stablehlo.reshape %n1 : (tensor<i32>) -> tensor<1xi32>
  %r2 = stablehlo.reshape %n2 : (tensor<i32>) -> tensor<1xi32>
  %v = stablehlo.concatenate %r1, %r2, %other, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
  return %v : tensor<3xi32>
}

// -----

// An op that reads two lanes of one vector (x[0] + x[1], x[1] + x[0]) is no lane's own op:
// it stays scalar.

// CHECK-LABEL: func.func @two_lanes_in_one_op
// CHECK:         stablehlo.add {{.*}} : tensor<i32>
// CHECK:         stablehlo.add {{.*}} : tensor<i32>
// CHECK-NOT:     tensor<2xi32>) -> tensor<2xi32>
func.func @two_lanes_in_one_op(%e: tensor<2xi32>) -> (tensor<i32>, tensor<i32>) {
  %s0 = stablehlo.slice %e [0:1] : (tensor<2xi32>) -> tensor<1xi32>
  %e0 = stablehlo.reshape %s0 : (tensor<1xi32>) -> tensor<i32>
  %s1 = stablehlo.slice %e [1:2] : (tensor<2xi32>) -> tensor<1xi32>
  %e1 = stablehlo.reshape %s1 : (tensor<1xi32>) -> tensor<i32>
  %a = stablehlo.add %e0, %e1 : tensor<i32>
  %b = stablehlo.add %e1, %e0 : tensor<i32>
  return %a, %b : tensor<i32>, tensor<i32>
}
