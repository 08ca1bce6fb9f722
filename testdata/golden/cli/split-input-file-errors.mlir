// An error in one chunk is reported with its line and column in this file,
// the exit status is non-zero, and the other chunks are still rewritten and
// printed (stdout and stderr are checked apart: their interleaving is not
// defined).
// RUN: not scalify-hlo rewrite %s --split-input-file 2>/dev/null | filecheck %s
// RUN: not scalify-hlo rewrite %s --split-input-file 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix ERR

// CHECK-LABEL: func.func public @before_errors
// CHECK-NOT:     @bad
func.func public @before_errors(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  return %arg0 : tensor<4xf32>
}

// -----

// A parse error: %undefined is not defined.

// ERR: error: {{(.*/)?}}split-input-file-errors.mlir:[[# @LINE + 2]]:{{[0-9]+}}: use of undeclared SSA value name
func.func public @bad_parse(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %arg0, %undefined : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func public @between_errors
// CHECK-NOT:     @bad
func.func public @between_errors(%arg0: tensor<4xi32>) -> tensor<4xi32> {
  return %arg0 : tensor<4xi32>
}

// -----

// A verifier error: the result shape does not match the operands'.

// ERR: error: {{(.*/)?}}split-input-file-errors.mlir:[[# @LINE + 2]]:{{[0-9]+}}: 'stablehlo.add' op
func.func public @bad_verify(%arg0: tensor<4xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %arg0, %arg0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// CHECK-LABEL: func.func public @after_errors
// CHECK-NOT:     @bad
// ERR-NOT:     error
func.func public @after_errors(%arg0: tensor<f32>) -> tensor<f32> {
  return %arg0 : tensor<f32>
}
