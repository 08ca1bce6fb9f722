// RUN: scalify-hlo rewrite %s --pipeline 'fp8-dots{scaling=none head-operands=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --pipeline 'fp8-dots{scaling=none}' | filecheck %s --check-prefix DATA

// head-operands=f32 (what TPU targets run): a kept head dot reads its bf16 operands
// converted to f32, exactly, and produces f32 as before, converted back after it. XLA:CPU
// cannot run the bf16 x bf16 -> f32 dot of the default (data); XLA:TPU folds the converts.
// The FP8 dots are unchanged.

// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.dot_general {{.*}} : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
// CHECK-DAG:     %[[H:.*]] = stablehlo.convert {{.*}} : (tensor<8x4xbf16>) -> tensor<8x4xf32>
// CHECK-DAG:     %[[W:.*]] = stablehlo.convert %arg2 : (tensor<4x2xbf16>) -> tensor<4x2xf32>
// CHECK:         %[[L:.*]] = stablehlo.dot_general %[[H]], %[[W]], contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
// CHECK-NEXT:    stablehlo.convert %[[L]] : (tensor<8x2xf32>) -> tensor<8x2xbf16>
// CHECK-NOT:     stablehlo.dot_general {{.*}} : (tensor<{{[0-9x]*}}xbf16>
// DATA-LABEL:    func.func public @main
// DATA:          stablehlo.dot_general {{.*}} : (tensor<8x4xbf16>, tensor<4x2xbf16>) -> tensor<8x2xf32>
func.func public @main(%x: tensor<8x16xbf16>, %w1: tensor<16x4xbf16>, %w2: tensor<4x2xbf16>) -> tensor<bf16> {
  %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16> loc("jit(step)/jvp(loss)/hidden/dot_general")
  %logits = stablehlo.dot_general %h, %w2, contracting_dims = [1] x [0] : (tensor<8x4xbf16>, tensor<4x2xbf16>) -> tensor<8x2xbf16> loc("jit(step)/jvp(loss)/head/dot_general")
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<bf16> loc("jit(step)/jvp(loss)/reduce_sum")
  %loss = stablehlo.reduce(%logits init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<8x2xbf16>, tensor<bf16>) -> tensor<bf16> loc("jit(step)/jvp(loss)/reduce_sum")
  return %loss : tensor<bf16>
}
