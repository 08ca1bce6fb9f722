// concatenate of an input at 2^-100 and one at 2^100: the second part is rescaled by 2^200 (inf in
// f32) and comes out as inf instead of about 1e30.
// Fixed bug (common-scale=first: runtime scale ratio overflows f32 (inf result)): runtime scales are now i32 exponents, exact;
// the common scale is the max of the exponents (the midpoint for select/concatenate in f32).
// RUN: scalify-hlo rewrite %s --pipeline 'scalify{data-dtype=f32},simplify' | filecheck %s
// CHECK-LABEL: @main
// SCALES: -100 100
// SEED: 0
func.func public @main(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> tensor<4xf32> {
  %0 = stablehlo.concatenate %arg0, %arg1, dim = 0 : (tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
