// As runtime-scale-underflow, but the product's zero scale is carried by a while loop: the add in
// the body divides x's scale by the carried 0 scale (inf) and every result is NaN instead of x
// (about 1e-31).
// Fixed bug (runtime scale product underflows to 0; loop-carried zero scale gives NaN): runtime scales are now i32 exponents, exact;
// the common scale is the max of the exponents (the midpoint for select/concatenate in f32).
// RUN: scalify-hlo rewrite %s --pipeline 'scalify{data-dtype=f32},simplify' | filecheck %s
// CHECK-LABEL: @main
// SCALES: -100
// SEED: 0
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %0 = stablehlo.multiply %arg0, %arg0 : tensor<4xf32>
  %1:2 = stablehlo.while(%x = %0, %i = %c0) : tensor<4xf32>, tensor<i32>
  cond {
    %p = stablehlo.compare LT, %i, %c1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %y = stablehlo.add %x, %arg0 : tensor<4xf32>
    %j = stablehlo.add %i, %c1 : tensor<i32>
    stablehlo.return %y, %j : tensor<4xf32>, tensor<i32>
  }
  return %1#0 : tensor<4xf32>
}
