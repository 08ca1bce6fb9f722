// RUN: scalify-hlo rewrite %s --split-input-file --pipeline simplify | filecheck %s

// simplify fences FP8 casts after CSE: fp8-dots casts a weight once per dot (the same ops),
// CSE leaves one cast, and in a partitioned module both dots read it through one barrier.

// CHECK-LABEL: func.func @cast_twice
// CHECK:         [[C:%.*]] = stablehlo.convert %arg1 : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
// CHECK-NEXT:    [[B:%.*]] = stablehlo.optimization_barrier [[C]] : tensor<8x16xf8E4M3FN>
// CHECK-NOT:     stablehlo.convert %arg1
// CHECK:         stablehlo.transpose [[B]]
// CHECK:         stablehlo.dot_general %{{.*}}, [[B]]
module attributes {mhlo.num_partitions = 2 : i32} {
  func.func @cast_twice(%x: tensor<4x8xf8E4M3FN>, %w: tensor<8x16xf16>, %dy: tensor<4x16xf8E5M2>) -> (tensor<4x16xf32>, tensor<4x8xf32>) {
    %c0 = stablehlo.convert %w : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
    %t = stablehlo.transpose %c0, dims = [1, 0] : (tensor<8x16xf8E4M3FN>) -> tensor<16x8xf8E4M3FN>
    %y = stablehlo.dot_general %x, %t, contracting_dims = [1] x [1] : (tensor<4x8xf8E4M3FN>, tensor<16x8xf8E4M3FN>) -> tensor<4x16xf32>
    %c1 = stablehlo.convert %w : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
    %dx = stablehlo.dot_general %dy, %c1, contracting_dims = [1] x [1] : (tensor<4x16xf8E5M2>, tensor<8x16xf8E4M3FN>) -> tensor<4x8xf32>
    return %y, %dx : tensor<4x16xf32>, tensor<4x8xf32>
  }
}
