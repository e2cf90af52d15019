-- Weekly report: Monday 09:00, to every manager — everyone who is someone's
-- manager (people.manager_of) — with the team the directory has that
-- morning. When Monday is a statutory holiday the report moves to the next
-- workday (shift = "next_workday") instead of being dropped.
--
-- Directory-driven: with a `directory:` section in the node config, people,
-- departments, tags and managers come from WeCom's contacts (refreshed by
-- the leader and replicated to every node), merged with people.csv (the
-- file wins per userid). Someone who moves to another team in WeCom is in
-- their new manager's report the next Monday; nobody edits a file on three
-- nodes. Without a directory, people.csv alone is the directory.
return rule {
  name        = "weekly_report",
  description = "Monday 09:00: every manager gets their team's weekly report; team from the WeCom directory",
  schedule    = "0 9 * * 1",
  timezone    = "Asia/Shanghai",
  calendar    = "cn_workday",
  shift       = "next_workday",
  channel     = "wecom_sales",
  stagger     = { batches = 2, spacing = "2m" },
  deadline    = "4h",

  recipients = function(run)
    local managers, seen = {}, {}
    for _, p in ipairs(people.all()) do
      local m = people.manager_of(p)
      if m and not seen[m.userid] then
        seen[m.userid] = true
        managers[#managers + 1] = m
      end
    end
    return managers
  end,

  message = function(run, to)
    local team = {}
    for _, p in ipairs(people.where { manager = to.userid }) do
      team[#team + 1] = p.name or p.userid
    end
    local week_start = time.add_days(time.now(), -7)
    local note = ""
    if time.weekday(time.now()) ~= 1 then
      note = "\n（周一为法定节假日，顺延至今日）"
    end
    return {
      msgtype = "markdown",
      content = "**" .. (to.name or to.userid) .. "，请汇总团队上周（" .. time.date(week_start) .. " 起）的周报**\n"
        .. "团队 " .. #team .. " 人：" .. table.concat(team, "、") .. note,
    }
  end,
}
