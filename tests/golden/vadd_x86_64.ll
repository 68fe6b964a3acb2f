; ModuleID = "vadd"
target triple = "x86_64-unknown-linux-gnu"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"

define void @"vadd"(ptr noalias %"A", ptr noalias %"B", ptr noalias %"C") #0
{
entry:
  br label %"start"
start:
  br label %"for.i.outer"
for.i.outer:
  %"i.outer" = phi  i64 [0, %"start"], [%".21", %"for.i.outer.body"]
  %".6" = icmp slt i64 %"i.outer", 4
  br i1 %".6", label %"for.i.outer.body", label %"for.i.outer.end"
for.i.outer.body:
  %".8" = mul i64 %"i.outer", 16
  %".9" = add i64 %".8", 0
  %".10" = getelementptr inbounds float, ptr %"A", i64 %".9"
  %".11" = load <16 x float>, ptr %".10", align 4, !alias.scope !4, !noalias !5
  %".12" = mul i64 %"i.outer", 16
  %".13" = add i64 %".12", 0
  %".14" = getelementptr inbounds float, ptr %"B", i64 %".13"
  %".15" = load <16 x float>, ptr %".14", align 4, !alias.scope !6, !noalias !7
  %".16" = fadd contract <16 x float> %".11", %".15"
  %".17" = mul i64 %"i.outer", 16
  %".18" = add i64 %".17", 0
  %".19" = getelementptr inbounds float, ptr %"C", i64 %".18"
  store <16 x float> %".16", ptr %".19", align 4, !alias.scope !8, !noalias !9
  %".21" = add nsw i64 %"i.outer", 1
  br label %"for.i.outer"
for.i.outer.end:
  ret void
}

!0 = !{ !"autosched vadd" }
!1 = !{ !"autosched vadd 0 A", !0 }
!2 = !{ !"autosched vadd 1 B", !0 }
!3 = !{ !"autosched vadd 2 C", !0 }
!4 = !{ !1 }
!5 = !{ !2, !3 }
!6 = !{ !2 }
!7 = !{ !1, !3 }
!8 = !{ !3 }
!9 = !{ !1, !2 }
attributes #0 = { nounwind "prefer-vector-width"="128" "min-legal-vector-width"="128" "target-cpu"="x86-64" }
