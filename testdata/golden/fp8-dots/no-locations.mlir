// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none}' --stats 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix WARN

// A module without JAX name-stack locations (no `jit(` anywhere: exported
// without debug info, or written by hand) cannot tell gradients from
// activations. fp8-dots warns once per module and casts every operand to the
// forward format, even where a location happens to contain `transpose(`.

// WARN:      warning: module has no JAX name-stack locations: every dot operand uses the forward format f8E4M3FN (export with debug info to use f8E5M2 for gradients)
// WARN-NEXT: warning: module has no JAX name-stack locations: every dot operand uses the forward format f8E4M3FN (export with debug info to use f8E5M2 for gradients)
// WARN-NOT:  warning
// WARN:      fp8-dots.dots: 3
// WARN-NEXT: fp8-dots.f8E4M3FNxf8E4M3FN: 3
// WARN-NEXT: fp8-dots.fp8: 3
// WARN-NOT:  fp8-dots.f8E5M2

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xf16>, [[W:%.*]]: tensor<16x4xf16>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[XC:%.*]] = stablehlo.clamp [[LO]], [[X]], [[HI]] : (tensor<f16>, tensor<8x16xf16>, tensor<f16>) -> tensor<8x16xf16>
// CHECK-NEXT:    [[X8:%.*]] = stablehlo.convert [[XC]] : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
// CHECK-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO2]], [[W]], [[HI2]] : (tensor<f16>, tensor<16x4xf16>, tensor<f16>) -> tensor<16x4xf16>
// CHECK-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x4xf16>) -> tensor<16x4xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[X8]], [[W8]], contracting_dims = [1] x [0] : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[D]] : (tensor<8x4xf32>) -> tensor<8x4xf16>
// CHECK-NEXT:    return [[Y]] : tensor<8x4xf16>
func.func public @main(%x: tensor<8x16xf16>, %w: tensor<16x4xf16>) -> tensor<8x4xf16> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16>
  return %0 : tensor<8x4xf16>
}

// -----

// The dgrad and wgrad of a backward pass whose locations lost the `jit(...)`
// prefix: with the name stack, dy would be E5M2 (see backward.mlir); without
// it every operand is E4M3FN, clamped to +-448.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xf16>, [[W:%.*]]: tensor<16x4xf16>, [[G:%.*]]: tensor<8x4xf16>) -> (tensor<8x16xf16>, tensor<16x4xf16>)
// CHECK-NEXT:    [[DY:%.*]] = stablehlo.negate [[G]] : tensor<8x4xf16>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[DYC:%.*]] = stablehlo.clamp [[LO]], [[DY]], [[HI]] : (tensor<f16>, tensor<8x4xf16>, tensor<f16>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[DY8:%.*]] = stablehlo.convert [[DYC]] : (tensor<8x4xf16>) -> tensor<8x4xf8E4M3FN>
// CHECK-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO2]], [[W]], [[HI2]] : (tensor<f16>, tensor<16x4xf16>, tensor<f16>) -> tensor<16x4xf16>
// CHECK-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x4xf16>) -> tensor<16x4xf8E4M3FN>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.dot_general [[DY8]], [[W8]], contracting_dims = [1] x [1] : (tensor<8x4xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x16xf32>
// CHECK-NEXT:    [[DXH:%.*]] = stablehlo.convert [[DX]] : (tensor<8x16xf32>) -> tensor<8x16xf16>
// CHECK-NEXT:    [[LO3:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI3:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[XC:%.*]] = stablehlo.clamp [[LO3]], [[X]], [[HI3]] : (tensor<f16>, tensor<8x16xf16>, tensor<f16>) -> tensor<8x16xf16>
// CHECK-NEXT:    [[X8:%.*]] = stablehlo.convert [[XC]] : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
// CHECK-NEXT:    [[LO4:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI4:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[DYC2:%.*]] = stablehlo.clamp [[LO4]], [[DY]], [[HI4]] : (tensor<f16>, tensor<8x4xf16>, tensor<f16>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[DY82:%.*]] = stablehlo.convert [[DYC2]] : (tensor<8x4xf16>) -> tensor<8x4xf8E4M3FN>
// CHECK-NEXT:    [[DW:%.*]] = stablehlo.dot_general [[X8]], [[DY82]], contracting_dims = [0] x [0] : (tensor<8x16xf8E4M3FN>, tensor<8x4xf8E4M3FN>) -> tensor<16x4xf32>
// CHECK-NEXT:    [[DWH:%.*]] = stablehlo.convert [[DW]] : (tensor<16x4xf32>) -> tensor<16x4xf16>
// CHECK-NEXT:    return [[DXH]], [[DWH]] : tensor<8x16xf16>, tensor<16x4xf16>
// CHECK-NOT:     f8E5M2
func.func public @main(%x: tensor<8x16xf16>, %w: tensor<16x4xf16>, %g: tensor<8x4xf16>) -> (tensor<8x16xf16>, tensor<16x4xf16>) {
  %dy = stablehlo.negate %g : tensor<8x4xf16> loc("transpose(jvp(loss))/neg")
  %dx = stablehlo.dot_general %dy, %w, contracting_dims = [1] x [1] : (tensor<8x4xf16>, tensor<16x4xf16>) -> tensor<8x16xf16> loc("transpose(jvp(loss))/dot_general")
  %dw = stablehlo.dot_general %x, %dy, contracting_dims = [0] x [0] : (tensor<8x16xf16>, tensor<8x4xf16>) -> tensor<16x4xf16> loc("transpose(jvp(loss))/dot_general")
  return %dx, %dw : tensor<8x16xf16>, tensor<16x4xf16>
}
