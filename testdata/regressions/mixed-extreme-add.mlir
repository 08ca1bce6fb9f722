// Inputs at 2^-100 and 2^100 added. common-scale=first (the f32 default) rescales the second
// operand by the runtime ratio 2^100 / 2^-100 = 2^200, which is inf in f32: the result is +-inf
// where the original is finite (about 1e30).
// Fixed bug (common-scale=first: runtime scale ratio overflows f32 (inf result)): runtime scales are now i32 exponents, exact;
// the common scale is the max of the exponents (the midpoint for select/concatenate in f32).
// RUN: scalify-hlo rewrite %s --pipeline 'scalify{data-dtype=f32},simplify' | filecheck %s
// CHECK-LABEL: @main
// SCALES: -100 100
// SEED: 0
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}
