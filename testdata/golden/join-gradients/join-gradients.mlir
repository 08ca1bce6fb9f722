// RUN: scalify-hlo rewrite %s --split-input-file --pipeline join-gradients | filecheck %s

// Two gradients (marked by scalify), the first one's update read before the second is
// made: one element of each, compared with itself and converted, the least of them (a
// sort) times 0 is the join; each gradient's bits ORed with it (i32 for f32, i16 for f16);
// the update ops move after the join and read the joined values; the marks are gone.

// CHECK-LABEL: func.func @two_gradients
// CHECK:         [[G1:%.*]] = stablehlo.negate %arg2 : tensor<4xf32>
// CHECK-NEXT:    [[G2:%.*]] = stablehlo.abs %arg3 : tensor<2x3xf16>
// CHECK-NEXT:    [[E1:%.*]] = stablehlo.slice [[G1]] [0:1]
// CHECK-NEXT:    [[R1:%.*]] = stablehlo.reshape [[E1]] : (tensor<1xf32>) -> tensor<f32>
// CHECK-NEXT:    [[C1:%.*]] = stablehlo.compare EQ, [[R1]], [[R1]], FLOAT
// CHECK-NEXT:    [[T1:%.*]] = stablehlo.convert [[C1]] : (tensor<i1>) -> tensor<f32>
// CHECK-NEXT:    [[E2:%.*]] = stablehlo.slice [[G2]] [0:1, 0:1]
// CHECK-NEXT:    [[R2:%.*]] = stablehlo.reshape [[E2]] : (tensor<1x1xf16>) -> tensor<f16>
// CHECK-NEXT:    [[C2:%.*]] = stablehlo.compare EQ, [[R2]], [[R2]], FLOAT
// CHECK-NEXT:    [[T2:%.*]] = stablehlo.convert [[C2]] : (tensor<i1>) -> tensor<f32>
// CHECK-NEXT:    [[V1:%.*]] = stablehlo.reshape [[T1]] : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT:    [[V2:%.*]] = stablehlo.reshape [[T2]] : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT:    [[V:%.*]] = stablehlo.concatenate [[V1]], [[V2]], dim = 0
// CHECK-NEXT:    [[SORTED:%.*]] = "stablehlo.sort"([[V]])
// CHECK:         stablehlo.compare LT
// CHECK:         [[LEAST:%.*]] = stablehlo.slice [[SORTED]] [0:1]
// CHECK-NEXT:    [[S:%.*]] = stablehlo.reshape [[LEAST]] : (tensor<1xf32>) -> tensor<f32>
// CHECK:         [[Z:%.*]] = stablehlo.multiply [[S]], %{{.*}} : tensor<f32>
// CHECK-NEXT:    [[Z32:%.*]] = stablehlo.convert [[Z]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:    [[B1:%.*]] = stablehlo.bitcast_convert [[G1]] : (tensor<4xf32>) -> tensor<4xi32>
// CHECK-NEXT:    [[Z1:%.*]] = stablehlo.broadcast_in_dim [[Z32]], dims = [] : (tensor<i32>) -> tensor<4xi32>
// CHECK-NEXT:    [[O1:%.*]] = stablehlo.or [[B1]], [[Z1]] : tensor<4xi32>
// CHECK-NEXT:    [[J1:%.*]] = stablehlo.bitcast_convert [[O1]] : (tensor<4xi32>) -> tensor<4xf32>
// CHECK-NEXT:    [[Z16:%.*]] = stablehlo.convert [[Z]] : (tensor<f32>) -> tensor<i16>
// CHECK:         [[J2:%.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<2x3xi16>) -> tensor<2x3xf16>
// CHECK-NEXT:    [[U1:%.*]] = stablehlo.subtract %arg0, [[J1]] : tensor<4xf32>
// CHECK-NEXT:    [[U2:%.*]] = stablehlo.subtract %arg1, [[J2]] : tensor<2x3xf16>
// CHECK-NEXT:    return [[U1]], [[U2]]
// CHECK-NOT:     scalify.gradient
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @two_gradients(%w: tensor<4xf32>, %v: tensor<2x3xf16>, %x: tensor<4xf32>,
                           %y: tensor<2x3xf16>) -> (tensor<4xf32>, tensor<2x3xf16>) {
    %g1 = stablehlo.negate %x {scalify.gradient} : tensor<4xf32>
    %u1 = stablehlo.subtract %w, %g1 : tensor<4xf32>
    %g2 = stablehlo.abs %y {scalify.gradient} : tensor<2x3xf16>
    %u2 = stablehlo.subtract %v, %g2 : tensor<2x3xf16>
    return %u1, %u2 : tensor<4xf32>, tensor<2x3xf16>
  }
}

// -----

// A rank-0 gradient is its own element (no slice); a bf16 one ORs i16 bits.

// CHECK-LABEL: func.func @scalar_and_bf16
// CHECK:         [[G1:%.*]] = stablehlo.negate %arg0 : tensor<f32>
// CHECK-NEXT:    [[G2:%.*]] = stablehlo.negate %arg1 : tensor<3xbf16>
// CHECK-NEXT:    stablehlo.compare EQ, [[G1]], [[G1]], FLOAT
// CHECK:         stablehlo.slice [[G2]] [0:1]
// CHECK:         stablehlo.bitcast_convert [[G1]] : (tensor<f32>) -> tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[G2]] : (tensor<3xbf16>) -> tensor<3xi16>
// CHECK:         return
module attributes {mhlo.num_partitions = 2 : i32} {
  func.func @scalar_and_bf16(%x: tensor<f32>, %y: tensor<3xbf16>) -> (tensor<f32>, tensor<3xbf16>) {
    %g1 = stablehlo.negate %x {scalify.gradient} : tensor<f32>
    %g2 = stablehlo.negate %y {scalify.gradient} : tensor<3xbf16>
    return %g1, %g2 : tensor<f32>, tensor<3xbf16>
  }
}

// -----

// One gradient: nothing to keep apart; its mark is dropped.

// CHECK-LABEL: func.func @one_gradient
// CHECK-NOT:     scalify.gradient
// CHECK-NOT:     stablehlo.or
// CHECK:         return
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @one_gradient(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
    %g = stablehlo.negate %x {scalify.gradient} : tensor<4xf32>
    %u = stablehlo.subtract %w, %g : tensor<4xf32>
    return %u : tensor<4xf32>
  }
}

// -----

// A gradient computed from another (its reader would have to move after the join that
// reads it): nothing is joined, and the marks are dropped.

// CHECK-LABEL: func.func @tangled
// CHECK-NOT:     scalify.gradient
// CHECK-NOT:     stablehlo.or
// CHECK:         return
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @tangled(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %g1 = stablehlo.negate %x {scalify.gradient} : tensor<4xf32>
    %t = stablehlo.exponential %g1 : tensor<4xf32>
    %g2 = stablehlo.abs %t {scalify.gradient} : tensor<4xf32>
    return %g1, %g2 : tensor<4xf32>, tensor<4xf32>
  }
}
