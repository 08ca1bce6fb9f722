// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32},simplify' \
// RUN:   | filecheck %s

// Data drifting off unit through products under common-scale=first (the f32 and bf16
// default), issue 22 section 7. A tensor's data is off unit by whatever its scale does not
// carry (an argument given as data 2^-20 at scale 2^20, a sum dominated by the operand whose
// scale it did not take), and every product multiplies those offsets.

// The common scale of operands with unrelated runtime scales is the first that is one
// runtime factor as it is: b's own, not x @ w's (two factors). The result's data inherits
// the drift of the scale it takes; an MLP with every input's data at 2^-20 flushed
// sum((relu(x @ w1 + b1) @ w2)^2) at x's, w1's and w2's scales, squared (2^-120). Same
// cost: one operand (the dot) rescaled, b's data and scale used as they are.
// CHECK-LABEL: func.func public @main
// CHECK:         [[DOT:%.*]] = stablehlo.dot_general %arg0, %arg2
// CHECK:         [[D:%.*]] = stablehlo.multiply [[DOT]], {{%.*}} : tensor<2x4xf32>
// CHECK:         [[SUM:%.*]] = stablehlo.add [[D]], %arg4 : tensor<2x4xf32>
// CHECK:         return [[SUM]], %arg5
func.func public @main(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>, %b: tensor<2x4xf32>)
    -> tensor<2x4xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = stablehlo.add %0, %b : tensor<2x4xf32>
  return %1 : tensor<2x4xf32>
}

// -----

// An argument's own scale is one runtime factor as it is: an update hands the weight's
// scale back (here even with the weight second, lr * g * h + w), so that feeding the
// step's outputs back keeps the weights' scales. A scale shifted by a constant (0.9 * mu's,
// 2^-1 times mu's) is not preferred: returned, it would move by 2^-1 on every call.
// CHECK-LABEL: func.func public @main
// CHECK:         [[SUM:%.*]] = stablehlo.add {{%.*}}, %arg0 : tensor<4xf32>
// CHECK:         return [[SUM]], %arg1
func.func public @main(%w: tensor<4xf32>, %g: tensor<4xf32>, %h: tensor<4xf32>)
    -> tensor<4xf32> {
  %lr = stablehlo.constant dense<1.000000e-01> : tensor<4xf32>
  %0 = stablehlo.multiply %g, %h : tensor<4xf32>
  %1 = stablehlo.multiply %lr, %0 : tensor<4xf32>
  %2 = stablehlo.add %1, %w : tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// y = x/2 - 2 takes the larger of x's scale and the constant's; where x's data is off unit
// (data 2^-20 at scale 2^20: the value 1, with the scale 2^19 for y, where the constant's
// data is 2^-18), so is y's, and a series in y (bessel_i0e's Clenshaw sums, a polynomial in
// Horner's form) raises that to the power of its length. An add of a
// runtime value and a constant whose result later elementwise products raise to a power of
// 2 or more is rescaled once (amax, rewrites/drift.py); z = x/2 + 2, used once in a
// product, is not.
// CHECK-LABEL: func.func public @main
// CHECK:         [[X:%.*]] = stablehlo.multiply %arg0, {{%.*}} : tensor<4xf32>
// CHECK:         [[Y:%.*]] = stablehlo.subtract [[X]], {{%.*}} : tensor<4xf32>
// CHECK:         [[A:%.*]] = stablehlo.abs [[Y]]
// CHECK:         stablehlo.reduce([[A]] {{.*}} applies stablehlo.maximum
// CHECK:         [[YR:%.*]] = stablehlo.multiply [[Y]], {{%.*}} : tensor<4xf32>
// CHECK:         [[Z:%.*]] = stablehlo.add [[X]], {{%.*}} : tensor<4xf32>
// CHECK-NOT:     stablehlo.reduce
// CHECK:         stablehlo.multiply [[YR]], {{%.*}} : tensor<4xf32>
// CHECK:         stablehlo.multiply [[Z]], {{%.*}} : tensor<4xf32>
// CHECK:         return
func.func public @main(%x: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %half = stablehlo.constant dense<5.000000e-01> : tensor<4xf32>
  %two = stablehlo.constant dense<2.000000e+00> : tensor<4xf32>
  %0 = stablehlo.multiply %half, %x : tensor<4xf32>
  %y = stablehlo.subtract %0, %two : tensor<4xf32>
  %1 = stablehlo.multiply %y, %y : tensor<4xf32>
  %z = stablehlo.add %0, %two : tensor<4xf32>
  %2 = stablehlo.multiply %z, %w : tensor<4xf32>
  return %1, %2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// A dot (or convolution, or reduce) ends the chain the analysis follows: through the layers
// of a model it would rescale layernorm's var + eps, whose rsqrt reaches the next layer's
// square and Adam's g * g, at a runtime reduction per layer (1.3% more ops on the sample
// transformer step) for a ratio that eps, far below a variance, does not reach.
// CHECK-LABEL: func.func public @main
// CHECK:         [[Y:%.*]] = stablehlo.subtract {{%.*}}, {{%.*}} : tensor<4x4xf32>
// CHECK-NOT:     stablehlo.reduce
// CHECK:         stablehlo.dot_general [[Y]], [[Y]]
// CHECK-NOT:     stablehlo.reduce
// CHECK:         return
func.func public @main(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %two = stablehlo.constant dense<2.000000e+00> : tensor<4x4xf32>
  %y = stablehlo.subtract %x, %two : tensor<4x4xf32>
  %0 = stablehlo.dot_general %y, %y, contracting_dims = [1] x [0]
      : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}
