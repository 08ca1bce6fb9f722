// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f32 common-scale=max}' | filecheck %s --check-prefix MAX
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16}' \
// RUN:   | filecheck %s --check-prefix F16

// Same-scale family: the op runs on the data, float operands first brought to
// one common power-of-two scale (an exact rescale), and the result carries that
// scale. The MAX and F16 prefixes check only the first two cases.

// Two operands with different runtime scales. common-scale=first (the default
// for f32 data) keeps the first operand's scale and rescales the second by
// y_s / x_s.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[R:%.*]] = stablehlo.divide [[YS]], [[XS]] : tensor<f32>
// CHECK-NEXT:    [[RB:%.*]] = stablehlo.broadcast_in_dim [[R]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[RB]] : tensor<4xf32>
// CHECK-NEXT:    [[M:%.*]] = stablehlo.maximum [[X]], [[Y1]] : tensor<4xf32>
// CHECK-NEXT:    return [[M]], [[XS]] : tensor<4xf32>, tensor<f32>

// common-scale=max: the runtime maximum of the scales, both operands rescaled
// by a factor <= 1, so no data can grow.

// MAX-LABEL: func.func public @main
// MAX-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// MAX-NEXT:    [[S:%.*]] = stablehlo.maximum [[XS]], [[YS]] : tensor<f32>
// MAX-NEXT:    [[RX:%.*]] = stablehlo.divide [[XS]], [[S]] : tensor<f32>
// MAX-NEXT:    [[RXB:%.*]] = stablehlo.broadcast_in_dim [[RX]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// MAX-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[RXB]] : tensor<4xf32>
// MAX-NEXT:    [[RY:%.*]] = stablehlo.divide [[YS]], [[S]] : tensor<f32>
// MAX-NEXT:    [[RYB:%.*]] = stablehlo.broadcast_in_dim [[RY]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// MAX-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[RYB]] : tensor<4xf32>
// MAX-NEXT:    [[M:%.*]] = stablehlo.maximum [[X1]], [[Y1]] : tensor<4xf32>
// MAX-NEXT:    return [[M]], [[S]] : tensor<4xf32>, tensor<f32>

// f16 data: common-scale=auto means max; the f32 ratios are converted to f16
// before they multiply the data.

// F16-LABEL: func.func public @main
// F16-SAME:    ([[X:%.*]]: tensor<4xf16>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf16>, [[YS:%.*]]: tensor<f32>)
// F16-SAME:    -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[S:%.*]] = stablehlo.maximum [[XS]], [[YS]] : tensor<f32>
// F16-NEXT:    [[RX:%.*]] = stablehlo.divide [[XS]], [[S]] : tensor<f32>
// F16-NEXT:    [[RXH:%.*]] = stablehlo.convert [[RX]] : (tensor<f32>) -> tensor<f16>
// F16-NEXT:    [[RXB:%.*]] = stablehlo.broadcast_in_dim [[RXH]], dims = [] : (tensor<f16>) -> tensor<4xf16>
// F16-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[RXB]] : tensor<4xf16>
// F16-NEXT:    [[RY:%.*]] = stablehlo.divide [[YS]], [[S]] : tensor<f32>
// F16-NEXT:    [[RYH:%.*]] = stablehlo.convert [[RY]] : (tensor<f32>) -> tensor<f16>
// F16-NEXT:    [[RYB:%.*]] = stablehlo.broadcast_in_dim [[RYH]], dims = [] : (tensor<f16>) -> tensor<4xf16>
// F16-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[RYB]] : tensor<4xf16>
// F16-NEXT:    [[M:%.*]] = stablehlo.maximum [[X1]], [[Y1]] : tensor<4xf16>
// F16-NEXT:    return [[M]], [[S]] : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.maximum %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// relu: a zero constant is the same at every scale, so it never forces a
// rescale, not even a runtime maximum under common-scale=max.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[M:%.*]] = stablehlo.maximum [[X]], [[Z]] : tensor<4xf32>
// CHECK-NEXT:    return [[M]], [[XS]] : tensor<4xf32>, tensor<f32>

// MAX-LABEL: func.func public @main
// MAX-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// MAX-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// MAX-NEXT:    [[M:%.*]] = stablehlo.maximum [[X]], [[Z]] : tensor<4xf32>
// MAX-NEXT:    return [[M]], [[XS]] : tensor<4xf32>, tensor<f32>

// F16-LABEL: func.func public @main
// F16-SAME:    ([[X:%.*]]: tensor<4xf16>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf16>
// F16-NEXT:    [[M:%.*]] = stablehlo.maximum [[X]], [[Z]] : tensor<4xf16>
// F16-NEXT:    return [[M]], [[XS]] : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.0> : tensor<4xf32>
  %0 = stablehlo.maximum %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// One operand: the op on the data, the scale passes through untouched.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<2x8xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<16xf32>, tensor<f32>)
// CHECK-NEXT:    [[R:%.*]] = stablehlo.reshape [[X]] : (tensor<2x8xf32>) -> tensor<16xf32>
// CHECK-NEXT:    return [[R]], [[XS]] : tensor<16xf32>, tensor<f32>
func.func public @main(%arg0: tensor<2x8xf32>) -> tensor<16xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<2x8xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<2x4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4x2xf32>, tensor<f32>)
// CHECK-NEXT:    [[T:%.*]] = stablehlo.transpose [[X]], dims = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
// CHECK-NEXT:    return [[T]], [[XS]] : tensor<4x2xf32>, tensor<f32>
func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<4x2xf32> {
  %0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<3x4xf32>, tensor<f32>)
// CHECK-NEXT:    [[B:%.*]] = stablehlo.broadcast_in_dim [[X]], dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    return [[B]], [[XS]] : tensor<3x4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<3x4xf32> {
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// select: the i1 predicate is not scaled; the two float branches are brought
// to the first one's scale.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[P:%.*]]: tensor<4xi1>, [[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[R:%.*]] = stablehlo.divide [[YS]], [[XS]] : tensor<f32>
// CHECK-NEXT:    [[RB:%.*]] = stablehlo.broadcast_in_dim [[R]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[RB]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.select [[P]], [[X]], [[Y1]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT:    return [[S]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xi1>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<4xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}
