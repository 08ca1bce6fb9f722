// x*x + x with x at scale 2^-100: the product's scale 2^-200 is a runtime f32 value and underflows
// to 0 (runtime scales are not saturated, only static ones are); the add keeps that first
// operand's scale, so every result is 0 instead of x (about 1e-31).
// Fixed bug (runtime scale product underflows to 0 (not saturated); result 0 instead of x): runtime scales are now i32 exponents, exact;
// the common scale is the max of the exponents (the midpoint for select/concatenate in f32).
// RUN: scalify-hlo rewrite %s --pipeline 'scalify{data-dtype=f32},simplify' | filecheck %s
// CHECK-LABEL: @main
// SCALES: -100
// SEED: 0
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %arg0, %arg0 : tensor<4xf32>
  %1 = stablehlo.add %0, %arg0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
