// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 common-scale=max}' \
// RUN:   | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix WARN

// Scatter family: when the update region adds, takes max/min or overwrites,
// operand and updates are brought to a common scale (here the maximum of
// their i32 exponents, common-scale=max) and the result carries it; the
// integer indices are untouched. Any other update region runs unscaled and is
// reported.

// Scatter-add (the gradient of a gather). The f32 argument scales are turned
// into i32 exponents (bits >> 23, minus 127); the common exponent E is their
// maximum, and each data is multiplied by 2^(e - E) <= 1, a factor built from
// bits (clamp to [-127, 127], + 127, << 23, bitcast). At the return, the f32
// scale is 2^clamp(E, -126, 127) and the data is multiplied by the excess
// 2^(E - that).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<2x1xi32>, [[U:%.*]]: tensor<2xf32>, [[US:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[US]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[UE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.maximum [[XE]], [[UE]] : tensor<i32>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.subtract [[XE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[DXC:%.*]] = stablehlo.clamp [[CM127]], [[DX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXB:%.*]] = stablehlo.add [[DXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXI:%.*]] = stablehlo.shift_left [[DXB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DXF:%.*]] = stablehlo.bitcast_convert [[DXI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DXFB:%.*]] = stablehlo.broadcast_in_dim [[DXF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[DXFB]] : tensor<4xf32>
// CHECK-NEXT:    [[DU:%.*]] = stablehlo.subtract [[UE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[DUC:%.*]] = stablehlo.clamp [[CM127]], [[DU]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DUB:%.*]] = stablehlo.add [[DUC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DUI:%.*]] = stablehlo.shift_left [[DUB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DUF:%.*]] = stablehlo.bitcast_convert [[DUI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DUFB:%.*]] = stablehlo.broadcast_in_dim [[DUF]], dims = [] : (tensor<f32>) -> tensor<2xf32>
// CHECK-NEXT:    [[U1:%.*]] = stablehlo.multiply [[U]], [[DUFB]] : tensor<2xf32>
// CHECK-NEXT:    [[S:%.*]] = "stablehlo.scatter"([[X1]], [[I]], [[U1]]) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
// CHECK-NEXT:    ^bb0([[A:%.*]]: tensor<f32>, [[B:%.*]]: tensor<f32>):
// CHECK-NEXT:      [[ADD:%.*]] = stablehlo.add [[A]], [[B]] : tensor<f32>
// CHECK-NEXT:      stablehlo.return [[ADD]] : tensor<f32>
// CHECK-NEXT:    }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[E]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.subtract [[E]], [[HI]] : tensor<i32>
// CHECK-NEXT:    [[LOC:%.*]] = stablehlo.clamp [[CM127]], [[LO]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOB:%.*]] = stablehlo.add [[LOC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOI:%.*]] = stablehlo.shift_left [[LOB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[LOF:%.*]] = stablehlo.bitcast_convert [[LOI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[LOFB:%.*]] = stablehlo.broadcast_in_dim [[LOF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[SD:%.*]] = stablehlo.multiply [[S]], [[LOFB]] : tensor<4xf32>
// CHECK-NEXT:    [[HIB:%.*]] = stablehlo.add [[HI]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[HII:%.*]] = stablehlo.shift_left [[HIB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[SS:%.*]] = stablehlo.bitcast_convert [[HII]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[SD]], [[SS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<2x1xi32>, %arg2: tensor<2xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Assignment (x.at[i].set(u)): the region returns the update as is. The same
// common scale as scatter-add: the maximum of the two exponents (a scatter is
// not one of the merge ops that take the midpoint for f32 data).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<2x1xi32>, [[U:%.*]]: tensor<2xf32>, [[US:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[US]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[UE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.maximum [[XE]], [[UE]] : tensor<i32>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.subtract [[XE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[DXC:%.*]] = stablehlo.clamp [[CM127]], [[DX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXB:%.*]] = stablehlo.add [[DXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXI:%.*]] = stablehlo.shift_left [[DXB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DXF:%.*]] = stablehlo.bitcast_convert [[DXI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DXFB:%.*]] = stablehlo.broadcast_in_dim [[DXF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[DXFB]] : tensor<4xf32>
// CHECK-NEXT:    [[DU:%.*]] = stablehlo.subtract [[UE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[DUC:%.*]] = stablehlo.clamp [[CM127]], [[DU]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DUB:%.*]] = stablehlo.add [[DUC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DUI:%.*]] = stablehlo.shift_left [[DUB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DUF:%.*]] = stablehlo.bitcast_convert [[DUI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DUFB:%.*]] = stablehlo.broadcast_in_dim [[DUF]], dims = [] : (tensor<f32>) -> tensor<2xf32>
// CHECK-NEXT:    [[U1:%.*]] = stablehlo.multiply [[U]], [[DUFB]] : tensor<2xf32>
// CHECK-NEXT:    [[S:%.*]] = "stablehlo.scatter"([[X1]], [[I]], [[U1]]) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
// CHECK-NEXT:    ^bb0({{%.*}}: tensor<f32>, [[B:%.*]]: tensor<f32>):
// CHECK-NEXT:      stablehlo.return [[B]] : tensor<f32>
// CHECK-NEXT:    }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[E]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.subtract [[E]], [[HI]] : tensor<i32>
// CHECK-NEXT:    [[LOC:%.*]] = stablehlo.clamp [[CM127]], [[LO]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOB:%.*]] = stablehlo.add [[LOC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOI:%.*]] = stablehlo.shift_left [[LOB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[LOF:%.*]] = stablehlo.bitcast_convert [[LOI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[LOFB:%.*]] = stablehlo.broadcast_in_dim [[LOF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[SD:%.*]] = stablehlo.multiply [[S]], [[LOFB]] : tensor<4xf32>
// CHECK-NEXT:    [[HIB:%.*]] = stablehlo.add [[HI]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[HII:%.*]] = stablehlo.shift_left [[HIB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[SS:%.*]] = stablehlo.bitcast_convert [[HII]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[SD]], [[SS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<2x1xi32>, %arg2: tensor<2xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    stablehlo.return %b : tensor<f32>
  }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Scatter-multiply does not commute with a common scale: operand and updates
// are unscaled (each data multiplied by 2^clamp(e, -126, 127), then by the
// excess 2^clamp(e - that, -127, 127), so no factor overflows), the scatter
// runs as in the original, the result has scale 1, and the fallback is
// reported.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<2x1xi32>, [[U:%.*]]: tensor<2xf32>, [[US:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[XHC:%.*]] = stablehlo.clamp [[CM126]], [[XE]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[XHB:%.*]] = stablehlo.add [[XHC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[XHI:%.*]] = stablehlo.shift_left [[XHB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[XHF:%.*]] = stablehlo.bitcast_convert [[XHI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[XHFB:%.*]] = stablehlo.broadcast_in_dim [[XHF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X0:%.*]] = stablehlo.multiply [[X]], [[XHFB]] : tensor<4xf32>
// CHECK-NEXT:    [[XL:%.*]] = stablehlo.subtract [[XE]], [[XHC]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[XLC:%.*]] = stablehlo.clamp [[CM127]], [[XL]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[XLB:%.*]] = stablehlo.add [[XLC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[XLI:%.*]] = stablehlo.shift_left [[XLB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[XLF:%.*]] = stablehlo.bitcast_convert [[XLI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[XLFB:%.*]] = stablehlo.broadcast_in_dim [[XLF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X0]], [[XLFB]] : tensor<4xf32>
// CHECK:         stablehlo.bitcast_convert [[US]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[UE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[UHC:%.*]] = stablehlo.clamp [[CM126]], [[UE]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[UHB:%.*]] = stablehlo.add [[UHC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[UHI:%.*]] = stablehlo.shift_left [[UHB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[UHF:%.*]] = stablehlo.bitcast_convert [[UHI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[UHFB:%.*]] = stablehlo.broadcast_in_dim [[UHF]], dims = [] : (tensor<f32>) -> tensor<2xf32>
// CHECK-NEXT:    [[U0:%.*]] = stablehlo.multiply [[U]], [[UHFB]] : tensor<2xf32>
// CHECK-NEXT:    [[UL:%.*]] = stablehlo.subtract [[UE]], [[UHC]] : tensor<i32>
// CHECK-NEXT:    [[ULC:%.*]] = stablehlo.clamp [[CM127]], [[UL]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[ULB:%.*]] = stablehlo.add [[ULC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[ULI:%.*]] = stablehlo.shift_left [[ULB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[ULF:%.*]] = stablehlo.bitcast_convert [[ULI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[ULFB:%.*]] = stablehlo.broadcast_in_dim [[ULF]], dims = [] : (tensor<f32>) -> tensor<2xf32>
// CHECK-NEXT:    [[U1:%.*]] = stablehlo.multiply [[U0]], [[ULFB]] : tensor<2xf32>
// CHECK-NEXT:    [[S:%.*]] = "stablehlo.scatter"([[X1]], [[I]], [[U1]]) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
// CHECK-NEXT:    ^bb0([[A:%.*]]: tensor<f32>, [[B:%.*]]: tensor<f32>):
// CHECK-NEXT:      [[M:%.*]] = stablehlo.multiply [[A]], [[B]] : tensor<f32>
// CHECK-NEXT:      stablehlo.return [[M]] : tensor<f32>
// CHECK-NEXT:    }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
// CHECK-NEXT:    [[C1:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[S]], [[C1]] : tensor<4xf32>, tensor<f32>

// WARN: warning: {{.*}}stablehlo.scatter has an update region that does not commute with scaling; running it unscaled (scale 1)
// WARN-NOT: warning
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<2x1xi32>, %arg2: tensor<2xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.multiply %a, %b : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
