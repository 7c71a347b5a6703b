([.[] | select(.kind == "service_up")][3].t) as $ready
| . as $ev
| [ $ev[] | select(.kind == "action_start") | . as $a
    | ($ev | map(select((.kind == "service_up" or .kind == "service_exit")
                        and .service == $a.target and .t > $a.t)) | .[0].t - $a.t) as $d
    | "\($a.action) \($a.target) \($d * 1000 | floor) ms" ]
| "all 4 services ready \($ready * 1000 | floor) ms | " + join(" | ")
