// --print-ir-after-all prints a header and the module to stderr after each
// pass; stdout still gets the final module only.
// RUN: scalify-hlo rewrite %s --pipeline inline,cse --print-ir-after-all 2>&1 >/dev/null \
// RUN:   | filecheck %s
// RUN: scalify-hlo rewrite %s --pipeline inline,cse --print-ir-after-all 2>/dev/null \
// RUN:   | filecheck %s --check-prefix OUT

// After inline: no call, two copies of the callee's body.
// CHECK:         // -----// IR Dump After inline //----- //
// CHECK-NEXT:    module {
// CHECK-NEXT:      func.func public @main
// CHECK-NOT:       {{\bcall @}}
// CHECK-COUNT-2:   stablehlo.sine
// CHECK-NOT:       {{\bcall @}}

// After cse: one copy left.
// CHECK:         // -----// IR Dump After cse //----- //
// CHECK-NEXT:    module {
// CHECK-NEXT:      func.func public @main
// CHECK:           stablehlo.sine
// CHECK-NOT:       stablehlo.sine
// CHECK-NOT:       IR Dump

// OUT-NOT:       IR Dump
// OUT:           func.func public @main
// OUT:             stablehlo.sine
// OUT-NOT:         stablehlo.sine
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @sin(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = call @sin(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = stablehlo.add %0, %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}
func.func private @sin(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.sine %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}
