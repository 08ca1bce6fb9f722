// concatenate of an input at 2^-100 and one at 2^100: the second part is rescaled by 2^200 (inf in
// f32) and comes out as inf instead of about 1e30.
// Exact now under common-scale=max (runtime scales are i32 exponents, adds take the max of the
// exponents, select/concatenate the midpoint), which this file's RUN line uses; the f32
// default, common-scale=first, keeps the limitation above past a 2^126 spread.
// RUN: scalify-hlo rewrite %s --pipeline 'scalify{data-dtype=f32 common-scale=max},simplify' | filecheck %s
// CHECK-LABEL: @main
// SCALES: -100 100
// SEED: 0
func.func public @main(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> tensor<4xf32> {
  %0 = stablehlo.concatenate %arg0, %arg1, dim = 0 : (tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
