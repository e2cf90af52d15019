-- "This customer enquiry has had no answer" (客户咨询超时未回提醒).
--
-- Through 微信客服 it needs no code outside Herald: each message to a
-- 微信客服 account is an event (wecom.kf.message, from the callback of a
-- wecom channel with callback_token and callback_aes_key). A customer's
-- message (origin 3) starts the WAIT timer for that customer, or restarts
-- it if one runs; a servicer's reply (origin 5) cancels it. on_event runs
-- at least once, so it acts only by keys built from the message.
--
-- Any other system can do the same with tasks: POST /v1/tasks when an
-- enquiry arrives, PUT /v1/tasks/KEY to move it, DELETE when answered.
-- Each level is its own task, so it escalates step by step:
--
--   level 1 (15 min): the assignee
--   level 2 (30 min): the assignee and their manager
--   level 3 (60 min): and the manager's manager
--
-- data: {"enquiry": "8812", "customer": "…", "assignee": "liuyang",
--        "level": 2, "waited": "30m"}
-- WAIT is how long a customer may wait (herald dev's demo: set "1m").
local WAIT = "15m"
-- Who answers each 微信客服 account (open_kfid); default for the rest.
local ASSIGNEE = { default = "liuyang" }

return rule {
  name        = "enquiry_timeout",
  description = "Unanswered customer enquiry, escalating by level",
  timezone    = "Asia/Shanghai",
  channel     = "wecom_sales",
  priority    = "high",
  retry       = { "30s", "1m", "2m" },
  deadline    = "30m",

  events = { "wecom.kf.message" },
  on_event = function(ev)
    local m = ev.data
    if not m.open_kfid or not m.external_userid then return end
    -- One timer per customer at a time; its key names the message that
    -- started it, so a new enquiry after an alert or a reply gets a new one.
    local prefix = "enquiry-" .. m.open_kfid .. "-" .. m.external_userid .. "-"
    local open = task.pending(prefix)
    if m.origin == 3 then
      if #open > 0 then
        for _, t in ipairs(open) do
          task.replace { key = t.key, after = WAIT } -- counted from ev.at: restarts the clock
        end
      else
        task.submit {
          key = prefix .. m.msgid, rule = "enquiry_timeout", after = WAIT,
          data = { enquiry = m.msgid, customer = m.external_userid, level = 1, waited = WAIT,
                   assignee = ASSIGNEE[m.open_kfid] or ASSIGNEE.default },
        }
      end
    elseif m.origin == 5 then
      for _, t in ipairs(open) do
        task.cancel(t.key)
      end
    end
  end,

  recipients = function(run)
    local d = run.data
    local list = { d.assignee }
    local level = tonumber(d.level) or 1
    local boss = d.assignee
    for _ = 2, level do
      local m = people.manager_of(boss)
      if not m then break end
      list[#list + 1] = m
      boss = m.userid
    end
    log.info("enquiry escalation", { enquiry = d.enquiry, level = level, recipients = #list })
    return list
  end,

  message = function(run, to)
    local d = run.data
    local lead = "客户咨询"
    if to.userid ~= d.assignee then
      lead = "【升级 L" .. tostring(d.level) .. "】客户咨询"
    end
    return {
      msgtype = "markdown",
      content = text.render("{{lead}} #{{enquiry}}（{{customer}}）已 {{waited}} 无人回复，请尽快处理。", {
        lead = lead, enquiry = d.enquiry, customer = d.customer, waited = d.waited or "15m",
      }),
    }
  end,
}
