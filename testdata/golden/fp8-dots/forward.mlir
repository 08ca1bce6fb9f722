// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none}' --stats 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix STATS

// fp8-dots on forward dots (locations under jit(...) but not under transpose(...)):
// both operands use the forward format E4M3FN. Per operand: clamp to +-448 (the
// largest finite E4M3FN; convert does not saturate, 465 -> NaN) in the data
// dtype, convert to f8E4M3FN; the dot produces f32 and is converted back to the
// data dtype. A 2-D dot with one contracting and one free dimension per operand
// needs no reshape and no transpose, and dot attributes (precision) are kept.

// --stats sums over the chunks: every dot of this file is cast, E4M3FN x E4M3FN,
// and none is reported (no warning: every chunk has name-stack locations).
// STATS-NOT:  warning
// STATS:      stablehlo.dot_general 5 5
// STATS:      fp8-dots.dots: 5
// STATS-NEXT: fp8-dots.f8E4M3FNxf8E4M3FN: 5
// STATS-NEXT: fp8-dots.fp8: 5
// STATS-NOT:  fp8-dots.left-alone

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xf16>, [[W:%.*]]: tensor<16x4xf16>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[XC:%.*]] = stablehlo.clamp [[LO]], [[X]], [[HI]] : (tensor<f16>, tensor<8x16xf16>, tensor<f16>) -> tensor<8x16xf16>
// CHECK-NEXT:    [[X8:%.*]] = stablehlo.convert [[XC]] : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
// CHECK-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO2]], [[W]], [[HI2]] : (tensor<f16>, tensor<16x4xf16>, tensor<f16>) -> tensor<16x4xf16>
// CHECK-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x4xf16>) -> tensor<16x4xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[X8]], [[W8]], contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[D]] : (tensor<8x4xf32>) -> tensor<8x4xf16>
// CHECK-NEXT:    return [[Y]] : tensor<8x4xf16>

func.func public @main(%x: tensor<8x16xf16>, %w: tensor<16x4xf16>) -> tensor<8x4xf16> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/dot_general")
  return %0 : tensor<8x4xf16>
}

// -----

// bf16 data: the clamp bounds are bf16 constants, the product comes back as bf16.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xbf16>, [[W:%.*]]: tensor<16x4xbf16>) -> tensor<8x4xbf16>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<bf16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<bf16>
// CHECK-NEXT:    [[XC:%.*]] = stablehlo.clamp [[LO]], [[X]], [[HI]] : (tensor<bf16>, tensor<8x16xbf16>, tensor<bf16>) -> tensor<8x16xbf16>
// CHECK-NEXT:    [[X8:%.*]] = stablehlo.convert [[XC]] : (tensor<8x16xbf16>) -> tensor<8x16xf8E4M3FN>
// CHECK-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<bf16>
// CHECK-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<bf16>
// CHECK-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO2]], [[W]], [[HI2]] : (tensor<bf16>, tensor<16x4xbf16>, tensor<bf16>) -> tensor<16x4xbf16>
// CHECK-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x4xbf16>) -> tensor<16x4xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[X8]], [[W8]], contracting_dims = [1] x [0] : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[D]] : (tensor<8x4xf32>) -> tensor<8x4xbf16>
// CHECK-NEXT:    return [[Y]] : tensor<8x4xbf16>

func.func public @main(%x: tensor<8x16xbf16>, %w: tensor<16x4xbf16>) -> tensor<8x4xbf16> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16> loc("jit(step)/jvp(loss)/dot_general")
  return %0 : tensor<8x4xbf16>
}

// -----

// f32 data: the f32 product is the result, no convert back.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xf32>, [[W:%.*]]: tensor<16x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f32>
// CHECK-NEXT:    [[XC:%.*]] = stablehlo.clamp [[LO]], [[X]], [[HI]] : (tensor<f32>, tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
// CHECK-NEXT:    [[X8:%.*]] = stablehlo.convert [[XC]] : (tensor<8x16xf32>) -> tensor<8x16xf8E4M3FN>
// CHECK-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f32>
// CHECK-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f32>
// CHECK-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO2]], [[W]], [[HI2]] : (tensor<f32>, tensor<16x4xf32>, tensor<f32>) -> tensor<16x4xf32>
// CHECK-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x4xf32>) -> tensor<16x4xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[X8]], [[W8]], contracting_dims = [1] x [0] : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
// CHECK-NEXT:    return [[D]] : tensor<8x4xf32>

func.func public @main(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32> loc("jit(step)/jvp(loss)/dot_general")
  return %0 : tensor<8x4xf32>
}

// -----

// Two forward dots in a row (an MLP's two layers): the second takes the f16
// result of the first, cast again. Every dot is cast, none is reported.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xf16>, [[W1:%.*]]: tensor<16x32xf16>, [[W2:%.*]]: tensor<32x4xf16>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<8x32xf16>
// CHECK:         [[D1:%.*]] = stablehlo.dot_general {{.*}} : (tensor<8x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>) -> tensor<8x32xf32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.convert [[D1]] : (tensor<8x32xf32>) -> tensor<8x32xf16>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.maximum [[H]], [[Z]] : tensor<8x32xf16>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[RC:%.*]] = stablehlo.clamp [[LO]], [[R]], [[HI]] : (tensor<f16>, tensor<8x32xf16>, tensor<f16>) -> tensor<8x32xf16>
// CHECK-NEXT:    [[R8:%.*]] = stablehlo.convert [[RC]] : (tensor<8x32xf16>) -> tensor<8x32xf8E4M3FN>
// CHECK:         [[D2:%.*]] = stablehlo.dot_general [[R8]], {{%.*}}, contracting_dims = [1] x [0] : (tensor<8x32xf8E4M3FN>, tensor<32x4xf8E4M3FN>) -> tensor<8x4xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[D2]] : (tensor<8x4xf32>) -> tensor<8x4xf16>
// CHECK-NEXT:    return [[Y]] : tensor<8x4xf16>

func.func public @main(%x: tensor<8x16xf16>, %w1: tensor<16x32xf16>, %w2: tensor<32x4xf16>) -> tensor<8x4xf16> {
  %z = stablehlo.constant dense<0.000000e+00> : tensor<8x32xf16> loc("jit(step)/jvp(loss)/relu")
  %0 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x32xf16>) -> tensor<8x32xf16> loc("jit(step)/jvp(loss)/dot_general")
  %1 = stablehlo.maximum %0, %z : tensor<8x32xf16> loc("jit(step)/jvp(loss)/relu")
  %2 = stablehlo.dot_general %1, %w2, contracting_dims = [1] x [0] : (tensor<8x32xf16>, tensor<32x4xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/dot_general")
  return %2 : tensor<8x4xf16>
}
