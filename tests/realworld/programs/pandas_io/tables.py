"""pandas reading and writing CSV and JSON files the program keeps beside it."""

import pandas as pd

frame = pd.DataFrame({"city": ["Oslo", "Lima", "Pune"], "rain_mm": [763.0, 6.4, 722.0]})
frame.to_csv("rain.csv", index=False)
frame.to_json("rain.json", orient="records")
read = pd.read_csv("rain.csv")
again = pd.read_json("rain.json", orient="records")
print(read.equals(again), read["rain_mm"].sum(), sorted(read["city"]))
print(pd.read_csv("stations.csv").groupby("country")["height_m"].max().to_dict())
