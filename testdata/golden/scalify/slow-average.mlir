// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16},simplify{pack-scales=none}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=bf16},simplify{pack-scales=none}' | filecheck %s

// An EMA of the weights, ema = 0.999 * ema + 0.001 * w, keeps f32 data with 16-bit data:
// 0.999 * ema rounds back to ema in 16 bits, and the average stood still. The argument, the
// decayed copy, the sum and the result are f32; the increment 0.001 * w is 16-bit.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%arg0: tensor<4xf32>, %arg1: tensor<f32>, %arg2: tensor<4x{{b?}}f16>, %arg3: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK:         stablehlo.multiply {{.*}}%arg0{{.*}} : tensor<4xf32>
// CHECK:         stablehlo.add {{%.*}} : tensor<4xf32>
func.func public @main(%ema: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %b = stablehlo.constant dense<0.999> : tensor<4xf32>
  %c = stablehlo.constant dense<1.000000e-03> : tensor<4xf32>
  %0 = stablehlo.multiply %b, %ema : tensor<4xf32>
  %1 = stablehlo.multiply %c, %w : tensor<4xf32>
  %2 = stablehlo.add %0, %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// A fast average (decay 0.9, a move of 10% per step) keeps the data type.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    (%arg0: tensor<4x{{b?}}f16>, %arg1: tensor<f32>, %arg2: tensor<4x{{b?}}f16>, %arg3: tensor<f32>)
func.func public @main(%ema: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %b = stablehlo.constant dense<0.9> : tensor<4xf32>
  %c = stablehlo.constant dense<0.1> : tensor<4xf32>
  %0 = stablehlo.multiply %b, %ema : tensor<4xf32>
  %1 = stablehlo.multiply %c, %w : tensor<4xf32>
  %2 = stablehlo.add %0, %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}
