// RUN: scalify-hlo rewrite %s --split-input-file --pipeline fence-fp8-casts | filecheck %s

// A weight cast to FP8 once (what CSE leaves of fp8-dots' two casts) and read by two dots,
// its forward one through a transpose, in a module partitioned over two devices: both read
// the cast through one optimization_barrier right after it.

// CHECK-LABEL: func.func @shared
// CHECK:         [[C:%.*]] = stablehlo.convert %arg1 : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
// CHECK-NEXT:    [[B:%.*]] = stablehlo.optimization_barrier [[C]] : tensor<8x16xf8E4M3FN>
// CHECK-NEXT:    [[T:%.*]] = stablehlo.transpose [[B]]
// CHECK:         stablehlo.dot_general %{{.*}}, [[T]]
// CHECK:         stablehlo.dot_general %{{.*}}, [[B]]
// CHECK-NOT:     stablehlo.optimization_barrier
module attributes {mhlo.num_partitions = 2 : i32} {
  func.func @shared(%x: tensor<4x8xf8E4M3FN>, %w: tensor<8x16xf16>, %dy: tensor<4x16xf8E5M2>) -> (tensor<4x16xf32>, tensor<4x8xf32>) {
    %c = stablehlo.convert %w : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
    %t = stablehlo.transpose %c, dims = [1, 0] : (tensor<8x16xf8E4M3FN>) -> tensor<16x8xf8E4M3FN>
    %y = stablehlo.dot_general %x, %t, contracting_dims = [1] x [1] : (tensor<4x8xf8E4M3FN>, tensor<16x8xf8E4M3FN>) -> tensor<4x16xf32>
    %dx = stablehlo.dot_general %dy, %c, contracting_dims = [1] x [1] : (tensor<4x16xf8E5M2>, tensor<8x16xf8E4M3FN>) -> tensor<4x8xf32>
    return %y, %dx : tensor<4x16xf32>, tensor<4x8xf32>
  }
}

// -----

// One device: no all-reduce for a joined kernel to wait for, so the cast stays as it is.

// CHECK-LABEL: func.func @one_device
// CHECK-NOT:     stablehlo.optimization_barrier
// CHECK:         return
func.func @one_device(%x: tensor<4x8xf8E4M3FN>, %w: tensor<8x16xf16>, %dy: tensor<4x16xf8E5M2>) -> (tensor<4x16xf32>, tensor<4x8xf32>) {
  %c = stablehlo.convert %w : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
  %t = stablehlo.transpose %c, dims = [1, 0] : (tensor<8x16xf8E4M3FN>) -> tensor<16x8xf8E4M3FN>
  %y = stablehlo.dot_general %x, %t, contracting_dims = [1] x [1] : (tensor<4x8xf8E4M3FN>, tensor<16x8xf8E4M3FN>) -> tensor<4x16xf32>
  %dx = stablehlo.dot_general %dy, %c, contracting_dims = [1] x [1] : (tensor<4x16xf8E5M2>, tensor<8x16xf8E4M3FN>) -> tensor<4x8xf32>
  return %y, %dx : tensor<4x16xf32>, tensor<4x8xf32>
}

// -----

// A cast one op reads, and a convert to f16 that two read: neither is a shared FP8 cast.

// CHECK-LABEL: func.func @not_shared
// CHECK-NOT:     stablehlo.optimization_barrier
// CHECK:         return
module attributes {mhlo.num_partitions = 2 : i32} {
  func.func @not_shared(%x: tensor<4x8xf8E4M3FN>, %w: tensor<16x8xf16>, %a: tensor<4x8xf32>) -> (tensor<4x16xf32>, tensor<4x8xf16>) {
    %c = stablehlo.convert %w : (tensor<16x8xf16>) -> tensor<16x8xf8E4M3FN>
    %y = stablehlo.dot_general %x, %c, contracting_dims = [1] x [1] : (tensor<4x8xf8E4M3FN>, tensor<16x8xf8E4M3FN>) -> tensor<4x16xf32>
    %h = stablehlo.convert %a : (tensor<4x8xf32>) -> tensor<4x8xf16>
    %s = stablehlo.add %h, %h : tensor<4x8xf16>
    %n = stablehlo.negate %h : tensor<4x8xf16>
    %r = stablehlo.add %s, %n : tensor<4x8xf16>
    return %y, %r : tensor<4x16xf32>, tensor<4x8xf16>
  }
}

// -----

// A weight brought to its FP8 scale by a factor from its own amax (current statistics): the
// factor is a splat, so the cast is still of a given tensor, and fenced.

// CHECK-LABEL: func.func @scaled_weight
// CHECK:         [[C:%.*]] = stablehlo.convert %{{.*}} : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
// CHECK-NEXT:    stablehlo.optimization_barrier [[C]]
module attributes {mhlo.num_partitions = 2 : i32} {
  func.func @scaled_weight(%x: tensor<4x8xf8E4M3FN>, %w: tensor<8x16xf16>, %dy: tensor<4x16xf8E5M2>) -> (tensor<4x16xf32>, tensor<4x8xf32>) {
    %zero = stablehlo.constant dense<0.0> : tensor<f16>
    %lo = stablehlo.constant dense<-448.0> : tensor<f16>
    %hi = stablehlo.constant dense<448.0> : tensor<f16>
    %abs = stablehlo.abs %w : tensor<8x16xf16>
    %amax = stablehlo.reduce(%abs init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<8x16xf16>, tensor<f16>) -> tensor<f16>
    %f = stablehlo.divide %hi, %amax : tensor<f16>
    %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f16>) -> tensor<8x16xf16>
    %s = stablehlo.multiply %w, %fb : tensor<8x16xf16>
    %k = stablehlo.clamp %lo, %s, %hi : (tensor<f16>, tensor<8x16xf16>, tensor<f16>) -> tensor<8x16xf16>
    %c = stablehlo.convert %k : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
    %t = stablehlo.transpose %c, dims = [1, 0] : (tensor<8x16xf8E4M3FN>) -> tensor<16x8xf8E4M3FN>
    %y = stablehlo.dot_general %x, %t, contracting_dims = [1] x [1] : (tensor<4x8xf8E4M3FN>, tensor<16x8xf8E4M3FN>) -> tensor<4x16xf32>
    %dx = stablehlo.dot_general %dy, %c, contracting_dims = [1] x [1] : (tensor<4x16xf8E5M2>, tensor<8x16xf8E4M3FN>) -> tensor<4x8xf32>
    return %y, %dx : tensor<4x16xf32>, tensor<4x8xf32>
  }
}

// -----

// An activation (a dot's result) cast once and read by two dots: computed by the function,
// not given, so no optimizer update reads it and it is left alone.

// CHECK-LABEL: func.func @activation
// CHECK-NOT:     stablehlo.optimization_barrier
// CHECK:         return
module attributes {mhlo.num_partitions = 2 : i32} {
  func.func @activation(%x: tensor<4x8xf16>, %w: tensor<8x8xf16>, %v: tensor<8x8xf8E4M3FN>) -> (tensor<4x8xf32>, tensor<8x8xf32>) {
    %h = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x8xf16>, tensor<8x8xf16>) -> tensor<4x8xf16>
    %c = stablehlo.convert %h : (tensor<4x8xf16>) -> tensor<4x8xf8E4M3FN>
    %y = stablehlo.dot_general %c, %v, contracting_dims = [1] x [1] : (tensor<4x8xf8E4M3FN>, tensor<8x8xf8E4M3FN>) -> tensor<4x8xf32>
    %g = stablehlo.dot_general %c, %c, contracting_dims = [0] x [0] : (tensor<4x8xf8E4M3FN>, tensor<4x8xf8E4M3FN>) -> tensor<8x8xf32>
    return %y, %g : tensor<4x8xf32>, tensor<8x8xf32>
  }
}
