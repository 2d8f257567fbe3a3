-- Argo CD health check for dtq Tasks (group dtq.dev, kind Task).
-- Install it as resource.customizations.health.dtq.dev_Task in argocd-cm
-- (docs/status.md shows the command). It reads the same fields kstatus does:
--   Progressing  the controller has not seen this generation yet (a new Task,
--                or a retry just asked for), or the task is not finished
--   Healthy      the task succeeded (condition Succeeded=True)
--   Degraded     it ended any other way: Failed, DeadLettered, Cancelled,
--                Expired, or rejected at submission (Succeeded=False)
local hs = { status = "Progressing", message = "Waiting for the dtq controller" }
if obj.status == nil or obj.status.observedGeneration == nil
    or obj.status.observedGeneration ~= obj.metadata.generation then
  return hs
end
if obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Succeeded" then
      if c.status == "True" then
        hs.status = "Healthy"
      elseif c.status == "False" then
        hs.status = "Degraded"
      end
      hs.message = c.message
      return hs
    end
  end
end
return hs
