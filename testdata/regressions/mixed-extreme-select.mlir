// select between an input at 2^100 and one at 2^-100: the first operand's scale (2^100) is the
// common one, so the other operand's data is multiplied by 2^-200 = 0 in f32: the selected small
// values come out as 0 instead of about 1e-31. (The predicate picks only the small operand,
// so that the absolute error floor of the comparison, relative to the largest output, is tiny.)
// Exact now under common-scale=max (runtime scales are i32 exponents, adds take the max of the
// exponents, select/concatenate the midpoint), which this file's RUN line uses; the f32
// default, common-scale=first, keeps the limitation above past a 2^126 spread.
// RUN: scalify-hlo rewrite %s --pipeline 'scalify{data-dtype=f32 common-scale=max},simplify' | filecheck %s
// CHECK-LABEL: @main
// SCALES: 100 -100
// SEED: 0
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %pred = stablehlo.constant dense<false> : tensor<4xi1>
  %0 = stablehlo.select %pred, %arg0, %arg1 : tensor<4xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}
