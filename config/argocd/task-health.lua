-- Argo CD health check for dtq Tasks (group dtq.dev, kind Task).
-- Install it as resource.customizations.health.dtq.dev_Task in argocd-cm
-- (docs/status.md shows the command). It reads what kstatus reads:
--   Progressing  the controller has not seen this generation yet (a new Task,
--                or a retry just asked for), or the task has not ended
--   Healthy      the task succeeded (condition Succeeded=True)
--   Degraded     it ended any other way: Failed, DeadLettered, Cancelled,
--                Expired, or rejected at submission (Succeeded=False)
local hs = { status = "Progressing", message = "Waiting for the dtq controller" }
if obj.status == nil or obj.status.observedGeneration ~= obj.metadata.generation then
  return hs
end
for _, c in ipairs(obj.status.conditions or {}) do
  if c.type == "Succeeded" then
    if c.status == "True" then
      hs.status = "Healthy"
    elseif c.status == "False" then
      hs.status = "Degraded"
    end
    hs.message = c.message
    return hs
  elseif c.type == "Reconciling" then
    hs.message = c.message
  end
end
return hs
