// (x - x) * y with x and y at 2^100: the product's runtime scale 2^200 overflows to inf, and the
// exact zeros of x - x become 0 * inf = NaN instead of 0.
// Fixed bug (runtime scale product overflows to inf (not saturated); zeros become NaN): runtime scales are now i32 exponents, exact;
// the common scale is the max of the exponents (the midpoint for select/concatenate in f32).
// RUN: scalify-hlo rewrite %s --pipeline 'scalify{data-dtype=f32},simplify' | filecheck %s
// CHECK-LABEL: @main
// SCALES: 100 100
// SEED: 0
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.subtract %arg0, %arg0 : tensor<4xf32>
  %1 = stablehlo.multiply %0, %arg1 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
