// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16}' \
// RUN:   | filecheck %s

// An RMS norm over each row, x * rsqrt(sum(x * x) / 8 + eps), with f16 data: the sum of
// squares is computed in f32 (square-dtype), and the product, bounded by sqrt(8), goes back
// to f16 at the static scale 1 with no statistic (normalized_values.py).
// CHECK-LABEL: func.func @main
// CHECK-NOT:     applies stablehlo.maximum
// CHECK:         stablehlo.rsqrt
// CHECK-NOT:     applies stablehlo.maximum
// CHECK:         [[Y:%.*]] = stablehlo.convert {{.*}} : (tensor<2x8xf32>) -> tensor<2x8xf16>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[Y]], [[ONE]]
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sq = stablehlo.multiply %x, %x : tensor<2x8xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2xf32>
  %row = stablehlo.broadcast_in_dim %sum, dims = [0] : (tensor<2xf32>) -> tensor<2x1xf32>
  %eighth = stablehlo.constant dense<0.125> : tensor<2x1xf32>
  %mean = stablehlo.multiply %row, %eighth : tensor<2x1xf32>
  %eps = stablehlo.constant dense<1.0e-5> : tensor<2x1xf32>
  %var = stablehlo.add %mean, %eps : tensor<2x1xf32>
  %r = stablehlo.rsqrt %var : tensor<2x1xf32>
  %rb = stablehlo.broadcast_in_dim %r, dims = [0, 1] : (tensor<2x1xf32>) -> tensor<2x8xf32>
  %y = stablehlo.multiply %x, %rb : tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// The same factor applied across rows (the sum of column 0's row broadcast along the other
// axis): no bound, so the product narrows by its amax.
// CHECK-LABEL: func.func @main
// CHECK:         stablehlo.rsqrt
// CHECK:         applies stablehlo.maximum
func.func @main(%x: tensor<2x8xf32>) -> tensor<8x2xf32> {
  %sq = stablehlo.multiply %x, %x : tensor<2x8xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2xf32>
  %eps = stablehlo.constant dense<1.0e-5> : tensor<2xf32>
  %var = stablehlo.add %sum, %eps : tensor<2xf32>
  %r = stablehlo.rsqrt %var : tensor<2xf32>
  %rb = stablehlo.broadcast_in_dim %r, dims = [1] : (tensor<2xf32>) -> tensor<8x2xf32>
  %xt = stablehlo.transpose %x, dims = [1, 0] : (tensor<2x8xf32>) -> tensor<8x2xf32>
  %y = stablehlo.multiply %xt, %rb : tensor<8x2xf32>
  return %y : tensor<8x2xf32>
}
