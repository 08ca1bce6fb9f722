// select between an input at 2^100 and one at 2^-100: the first operand's scale (2^100) is the
// common one, so the other operand's data is multiplied by 2^-200 = 0 in f32: the selected small
// values come out as 0 instead of about 1e-31. (The predicate picks only the small operand,
// so that the absolute error floor of the comparison, relative to the largest output, is tiny.)
// Fixed bug (common-scale=first: runtime scale ratio underflows f32 (selected values become 0)): runtime scales are now i32 exponents, exact;
// the common scale is the max of the exponents (the midpoint for select/concatenate in f32).
// RUN: scalify-hlo rewrite %s --pipeline 'scalify{data-dtype=f32},simplify' | filecheck %s
// CHECK-LABEL: @main
// SCALES: 100 -100
// SEED: 0
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %pred = stablehlo.constant dense<false> : tensor<4xi1>
  %0 = stablehlo.select %pred, %arg0, %arg1 : tensor<4xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}
