// RUN: scalify-hlo rewrite %s --pipeline simplify | filecheck %s --check-prefix GROUPED
// RUN: scalify-hlo rewrite %s --pipeline 'simplify{group-statistics=false}' | filecheck %s --check-prefix APART

// simplify runs group-statistics unless told not to: two amaxes needed by the same op are
// one row reduction by default (XLA:GPU and XLA:CPU run a group as two kernels), and stay
// two reductions with group-statistics=false, what TPU targets choose (XLA:TPU writes the
// concatenated rows out, a copy of every tensor read).

// GROUPED-LABEL: func.func public @two_amaxes
// GROUPED:         stablehlo.concatenate
// GROUPED:         stablehlo.reduce({{%.*}} init: {{%.*}}) applies stablehlo.maximum across dimensions = [1] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2xf32>
// GROUPED-NOT:     stablehlo.reduce
// GROUPED:         return

// APART-LABEL: func.func public @two_amaxes
// APART-NOT:     stablehlo.concatenate
// APART:         stablehlo.reduce({{%.*}} init: {{%.*}}) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
// APART:         stablehlo.reduce({{%.*}} init: {{%.*}}) applies stablehlo.maximum across dimensions = [0] : (tensor<6xf32>, tensor<f32>) -> tensor<f32>
// APART-NOT:     stablehlo.concatenate
// APART:         return
func.func public @two_amaxes(%arg0: tensor<2x4xf32>, %arg1: tensor<6xf32>) -> tensor<f32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %a = stablehlo.abs %arg0 : tensor<2x4xf32>
  %amax_a = stablehlo.reduce(%a init: %zero) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
  %b = stablehlo.abs %arg1 : tensor<6xf32>
  %amax_b = stablehlo.reduce(%b init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<6xf32>, tensor<f32>) -> tensor<f32>
  %p = stablehlo.multiply %amax_a, %amax_b : tensor<f32>
  return %p : tensor<f32>
}
