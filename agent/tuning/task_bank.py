"""The oracle's tasks and rules: phrasing templates, entities, the split, and one rule per task kind.

What it knows: the task kinds the ReAct tab shows — one city's weather, two cities compared, a
difference or sum of two temperatures, arithmetic, a two-hop search → lookup, who wrote a book, an
unknown city, a question that needs no tool, a validation error repaired, and one city's temperature
put through the calculator (doubled, halved, +5, below 30 °C, in Fahrenheit). Every kind has many
phrasings; the last few of each are held out, and so are 5 of the 15 weather cities, 5 of the 15
books and a set of unknown cities. `next_turn(task, seen)` is the oracle: the next assistant turn
from the task and the observations so far, answers read from the observations (never typed).
`expected(task, record)` is the judge of a question.

What it does not know: the loop, rendering, tokens or training (agent.tuning.trajectories, scripts/tune.py).
"""

from __future__ import annotations

import random
import re

from agent.messages import ResultKind
from agent.tools import WEATHER, load_encyclopedia
from agent.tuning.trajectories import Seen, Task, Turn

# --- entities and their split (held out: never in a training run) ---------------------------------
HELD_OUT_CITIES = ("Prague", "Lisbon", "Nairobi", "Bogotá", "Ottawa")
TRAIN_CITIES = tuple(c for c in WEATHER if c not in HELD_OUT_CITIES)
TRAIN_UNKNOWN = ("Cairo", "Mumbai", "Chicago", "Oslo", "Helsinki", "Warsaw", "Athens", "Seoul", "Lima", "Dublin")
HELD_OUT_UNKNOWN = ("Toronto", "Buenos Aires", "Istanbul", "Hanoi", "Zurich")
BOOKS = ("Invisible Cities", "Pride and Prejudice", "One Hundred Years of Solitude", "The Little Prince",
         "Things Fall Apart", "Norwegian Wood", "Pippi Longstocking", "The Metamorphosis", "Ulysses",
         "Don Quixote", "The Book of Disquiet", "The Handmaid's Tale", "Chess Story", "The Magic Mountain",
         "Weep Not, Child")
HELD_OUT_BOOKS = ("Norwegian Wood", "Ulysses", "The Handmaid's Tale", "Chess Story", "The Magic Mountain")
TRAIN_BOOKS = tuple(b for b in BOOKS if b not in HELD_OUT_BOOKS)

# --- phrasing templates: kind → (train templates, held-out templates) -----------------------------
WEATHER_Q = (
    ("What's the weather in {city}?", "How is the weather in {city} right now?",
     "Tell me the current weather in {city}.", "Is it raining in {city}?", "What's the temperature in {city} today?",
     "weather {city}", "I'm flying to {city} tomorrow. What's the weather like there now?",
     "Can you check the weather for {city}?", "How warm is it in {city}?", "Current conditions in {city}, please.",
     "Do I need an umbrella in {city} today?"),
    ("What is it like outside in {city}?", "Give me the weather report for {city}.", "Is it sunny in {city}?",
     "Any idea what the weather is doing in {city}?"))
COMPARE_Q = (  # (phrasing, what the answer leads with: warmer | colder | both)
    (("Is it warmer in {a} or in {b}?", "warmer"), ("Which is colder right now, {a} or {b}?", "colder"),
     ("Compare the weather in {a} and {b}.", "both"), ("What's the weather in {a} and in {b}?", "both"),
     ("Where is it warmer today: {a} or {b}?", "warmer"), ("Tell me the weather in {a} and {b}.", "both"),
     ("Which city is warmer, {a} or {b}?", "warmer"), ("How does the weather in {a} compare with {b}?", "both")),
    (("Should I pack warmer clothes for {a} or for {b}?", "colder"), ("Weather in {a} vs {b}?", "both"),
     ("Between {a} and {b}, where is it colder right now?", "colder")))
TEMP_MATH_Q = (  # (phrasing, operation)
    (("How much warmer is it in {a} than in {b}?", "difference"),
     ("What is the temperature difference between {a} and {b}?", "difference"),
     ("By how many degrees does the temperature in {a} differ from {b}?", "difference"),
     ("How many degrees apart are {a} and {b} right now?", "difference"),
     ("What is the sum of the temperatures in {a} and {b}?", "sum"),
     ("Add the temperatures of {a} and {b}.", "sum"),
     ("If you add up the temperatures in {a} and {b}, what do you get?", "sum")),
    (("What is the temperature gap between {a} and {b}?", "difference"),
     ("Total of the current temperatures in {a} and {b}?", "sum"),
     ("What is the average temperature of {a} and {b}?", "average"),
     ("Mean temperature of {a} and {b} right now?", "average"),
     ("What's the temperature in {a} in degrees Fahrenheit?", "fahrenheit")))
ARITHMETIC_Q = (  # (phrasing, expression, answer)
    (("What is {x} * {y}?", "{x} * {y}", "{x} * {y} = {r}."),
     ("A train travels {d} km in {t} hours. What is its average speed in km/h?", "{d} / {t}",
      "Its average speed is {r} km/h."),
     ("A notebook costs {p} euros. How much do {n} notebooks cost?", "{n} * {p}", "{n} notebooks cost {r} euros."),
     ("What is {pct}% of {x}?", "{x} * {pct} / 100", "{pct}% of {x} is {r}."),
     ("Compute ({x} + {y}) * {n}.", "({x} + {y}) * {n}", "({x} + {y}) * {n} = {r}."),
     ("I had {x} apples and gave away {y}. How many are left?", "{x} - {y}", "{r} apples are left."),
     ("Divide {x} by {n}.", "{x} / {n}", "{x} divided by {n} is {r}."),
     ("What is {x} plus {y} plus {d}?", "{x} + {y} + {d}", "The sum is {r}."),
     ("calculate {x} - {y} * {n}", "{x} - {y} * {n}", "{x} - {y} * {n} = {r}.")),
    (("A rectangle is {x} m long and {n} m wide. What is its area in square metres?", "{x} * {n}",
      "The area is {r} square metres."),
     ("How many minutes are there in {t} hours?", "{t} * 60", "There are {r} minutes in {t} hours."),
     ("{n} friends share a bill of {x} euros equally. How much does each pay?", "{x} / {n}",
      "Each pays {r} euros."),
     ("What is {n} to the power of 3?", "{n} ** 3", "{n} to the power of 3 is {r}.")))
TWO_HOP_Q = (  # (phrasing, what is asked: place | year)
    (("Where was the author of {book} born?", "place"), ("In which place was the writer of {book} born?", "place"),
     ("Who wrote {book}, and where was the author born?", "place"),
     ("Where is the birthplace of the person who wrote {book}?", "place"),
     ("In which year was the author of {book} born?", "year"), ("When was the writer of {book} born?", "year"),
     ("The author of {book}: in what year were they born?", "year")),
    (("Tell me the birthplace of the author of {book}.", "place"),
     ("What year was the creator of {book} born?", "year")))
WHO_WROTE_Q = (("Who wrote {book}?", "Who is the author of {book}?", "Tell me who wrote {book}.",
                "Which writer wrote {book}?"),
               ("Name the author of {book}.",))
NO_TOOL_Q = (  # (question, answer, word the answer must hold)
    (("Hello! Who are you?", "Hello! I am a helpful assistant. I can look up the weather, compute with a "
      "calculator and search a small encyclopedia.", "assistant"),
     ("What can you do?", "I can look up the current weather, compute arithmetic with a calculator and search "
      "a small encyclopedia.", "weather"),
     ("Thank you!", "You're welcome!", "welcome"), ("Say hello to the class.", "Hello, class!", "hello"),
     ("What is the opposite of hot?", "The opposite of hot is cold.", "cold"),
     ("Spell the word cat backwards.", "Backwards, cat is tac.", "tac"),
     ("Translate 'good morning' into French.", "Good morning in French is bonjour.", "bonjour"),
     ("How many letters are in the word dog?", "The word dog has 3 letters.", "3"),
     ("What colour do you get when you mix blue and yellow?", "Blue and yellow make green.", "green"),
     ("Good night!", "Good night!", "night")),
    (("Hi there, what are you?", "Hello! I am a helpful assistant with tools for the weather, arithmetic and "
      "an encyclopedia.", "assistant"),
     ("What is the opposite of up?", "The opposite of up is down.", "down"),
     ("Translate 'thank you' into Spanish.", "Thank you in Spanish is gracias.", "gracias")))
# --- extra TRAINING phrasings (train side only; indexed after each kind's train templates above) ----
# Casual, indirect and context-laden wordings so a question ABOUT the weather, a comparison, a
# computation or a book leads to the tool, not one fixed sentence. None equals a held-out phrasing;
# the lists above stay as they were (the held-in and held-out sets are drawn from them alone).
WEATHER_EXTRA_Q = (
    "Planning a picnic in {city} — what's it doing outside?", "{city} weather?", "Is it cold in {city}?",
    "What should I wear in {city} today?", "How's the weather looking in {city}?",
    "Is it hot in {city} at the moment?", "What are the conditions like in {city} right now?",
    "Could you tell me what the weather is in {city}?", "I'm heading out in {city}. Should I bring a jacket?",
    "Please look up the weather in {city}.", "Is it windy in {city}?", "Is it cloudy in {city} today?",
    "Any rain in {city} right now?", "How hot is it in {city}?", "How cold is it in {city} at the moment?",
    "My sister lives in {city}. What's the weather there today?", "Quick question: weather in {city}?",
    "What's the forecast for {city} right now?", "Tell me how the weather is in {city}.",
    "Check {city}'s weather, please.", "What's the current temperature in {city}?",
    "Is today a good day for a walk in {city}?", "Going for a run in {city} later. How's the weather?",
    "Do you know the weather in {city}?", "What does the sky look like over {city} today?",
    "Is it nice out in {city}?", "How are things weather-wise in {city}?",
    "I have a meeting in {city} this afternoon. What's the weather doing there?",
    "Hey, how's {city} looking weather-wise?", "Find out the weather in {city} for me.",
    "Is it freezing in {city}?", "weather in {city} now", "temperature {city}",
    "Should I take sunglasses in {city} today?",
    "Report the current weather in {city}, please.", "Can you see what it's like outdoors in {city}?")
COMPARE_EXTRA_Q = (
    ("Of {a} and {b}, which one is colder today?", "colder"),
    ("{a} or {b}: where is it warmer at the moment?", "warmer"),
    ("Is {a} colder than {b} right now?", "colder"), ("Is {a} warmer than {b} today?", "warmer"),
    ("Where would I be warmer right now, in {a} or in {b}?", "warmer"),
    ("I can travel to {a} or {b}. Which one is colder right now?", "colder"),
    ("Which of the two is chillier at the moment, {a} or {b}?", "colder"),
    ("Which city has the higher temperature, {a} or {b}?", "warmer"),
    ("Which city has the lower temperature right now, {a} or {b}?", "colder"),
    ("Give me the weather for both {a} and {b}.", "both"), ("How's the weather in {a} and {b} today?", "both"),
    ("{a} and {b} — what's the weather in each?", "both"), ("Check the weather in {a}, then in {b}.", "both"),
    ("Comparing {a} with {b}, which is colder today?", "colder"),
    ("Is it hotter in {a} or {b} right now?", "warmer"))
TEMP_MATH_EXTRA_Q = (
    ("What's the spread between the temperatures in {a} and {b}?", "difference"),
    ("How far apart are the temperatures of {a} and {b}?", "difference"),
    ("How big is the temperature difference between {a} and {b} today?", "difference"),
    ("By how much does {a}'s temperature differ from {b}'s?", "difference"),
    ("How many degrees separate {a} and {b} right now?", "difference"),
    ("Subtract the colder temperature from the warmer one for {a} and {b}.", "difference"),
    ("What do the temperatures in {a} and {b} add up to?", "sum"),
    ("Give me the combined temperature of {a} and {b}.", "sum"),
    ("What is {a}'s temperature plus {b}'s temperature?", "sum"),
    ("Sum up the current temperatures of {a} and {b}.", "sum"),
    ("Take the temperatures in {a} and {b} and add them together.", "sum"),
    ("What's the total when you add the temperatures of {a} and {b}?", "sum"))
ARITHMETIC_EXTRA_Q = (
    ("Multiply {x} by {n}.", "{x} * {n}", "{x} times {n} is {r}."),
    ("What is {x} minus {y}?", "{x} - {y}", "{x} minus {y} is {r}."),
    ("What is {y} squared?", "{y} ** 2", "{y} squared is {r}."),
    ("How many hours are in {n} days?", "{n} * 24", "There are {r} hours in {n} days."),
    ("A square has sides of {n} cm. What is its perimeter?", "4 * {n}", "The perimeter is {r} cm."),
    ("I save {y} euros a week. How much do I have after {n} weeks?", "{y} * {n}",
     "After {n} weeks you have {r} euros."),
    ("What is {x} divided by {t}?", "{x} / {t}", "{x} divided by {t} is {r}."),
    ("A shirt costs {x} euros and is {pct}% off. How much is the discount?", "{x} * {pct} / 100",
     "The discount is {r} euros."),
    ("Work out {x} + {y} - {n}.", "{x} + {y} - {n}", "{x} + {y} - {n} = {r}."),
    ("A car drives at {x} km/h for {t} hours. How far does it go?", "{x} * {t}", "It goes {r} km."),
    ("There are {n} boxes with {y} pens each. How many pens are there in total?", "{n} * {y}",
     "There are {r} pens in total."))
TWO_HOP_EXTRA_Q = (
    ("Where does the author of {book} come from?", "place"),
    ("Which town or city was the writer of {book} born in?", "place"),
    ("Find out where the novelist behind {book} was born.", "place"),
    ("The person who created {book} — where were they born?", "place"),
    ("Look up the birthplace of whoever wrote {book}.", "place"),
    ("In what year was the person behind {book} born?", "year"),
    ("What is the birth year of the author of {book}?", "year"), ("Which year was {book}'s author born in?", "year"),
    ("Tell me the year the writer of {book} was born.", "year"),
    ("Who created {book}, and when was that person born?", "year"),
    ("Give me the birth year of whoever wrote {book}.", "year"))
WHO_WROTE_EXTRA_Q = (
    "Who is {book} by?", "Who's the author of {book}?", "{book} — who wrote it?",
    "Which author is behind {book}?", "Do you know who wrote {book}?",
    "Tell me the name of the person who wrote {book}.", "Who penned {book}?", "I'm reading {book}. Who is its author?",
    "Who was {book} written by?", "Give me the author of {book}.", "Identify the author of {book}.",
    "Who created the book {book}?")
NO_TOOL_EXTRA_Q = (
    ("Hi!", "Hi! How can I help you?", "help"),
    ("Hey, who am I talking to?", "Hello! I am a helpful assistant. I can look up the weather, compute with a "
     "calculator and search a small encyclopedia.", "assistant"),
    ("What are you able to help with?", "I can look up the current weather, compute arithmetic with a calculator "
     "and search a small encyclopedia.", "weather"),
    ("Thanks a lot for your help!", "You're welcome!", "welcome"),
    ("Goodbye!", "Goodbye! Have a nice day.", "goodbye"),
    ("What is the opposite of big?", "The opposite of big is small.", "small"),
    ("What is the opposite of day?", "The opposite of day is night.", "night"),
    ("Translate 'cat' into German.", "Cat in German is Katze.", "katze"),
    ("Translate 'hello' into Italian.", "Hello in Italian is ciao.", "ciao"),
    ("How many legs does a spider have?", "A spider has 8 legs.", "8"),
    ("What colour is the sky on a clear day?", "On a clear day the sky is blue.", "blue"),
    ("Spell the word sun backwards.", "Backwards, sun is nus.", "nus"))
# Compositions on ONE city's temperature: (calculator expression, thought, answer).
# Every operation a student may ask is trained (the average and Fahrenheit since the fourth data set,
# with phrasings of their own: the held-out phrasings stay unseen).
ONE_CITY_OPS = {
    "fahrenheit": ("{t} * 9 / 5 + 32", "{city} has {t}°C; in Fahrenheit that is {e}.",
                   "It is {r}°F in {city} ({t}°C)."),
    "double": ("{t} * 2", "{city} has {t}°C; I double it with the calculator.",
               "Double the temperature in {city} is {r}°C ({city} has {t}°C)."),
    "plus5": ("{t} + 5", "{city} has {t}°C; 5 degrees warmer is {e}.",
              "Five degrees warmer, {city} would have {r}°C (now {t}°C)."),
    "below30": ("30 - {t}", "{city} has {t}°C; I compute 30 - {t} with the calculator.",
                "{city} is {r} degrees below 30°C (it has {t}°C)."),
    "half": ("{t} / 2", "{city} has {t}°C; I halve it with the calculator.",
             "Half the temperature in {city} is {r}°C ({city} has {t}°C).")}
# What the first thought of a run that needs the calculator after the weather says it will do: the
# thought names the whole plan before the first call (the lecture's "reason, then act"), so a run
# that needs a second tool says so from the start, and a plain weather question does not.
PLAN = {"fahrenheit": "convert it to Fahrenheit", "double": "double it", "plus5": "add 5 degrees",
        "below30": "subtract it from 30", "half": "halve it", "difference": "compute the difference",
        "sum": "compute the sum", "average": "compute the average",
        "warmer": "pick the warmer reading", "colder": "pick the colder reading"}
PICK = {"warmer": "max", "colder": "min"}  # a comparison's verdict: the calculator picks the reading
# --- more TRAINING phrasings (second round; train side only, indexed after the *_EXTRA_Q above) ---
WEATHER_MORE_Q = (
    "Weather check for {city}, please.", "How's it outside in {city} at the moment?",
    "What's the weather doing in {city} today?", "Can you tell me if it's warm in {city}?",
    "I want to know the weather in {city}.", "Look up {city}'s current weather.",
    "Is it a rainy day in {city}?", "What kind of weather is {city} having?",
    "Tell me the temperature and conditions in {city}.", "Is it snowing in {city}?")
COMPARE_MORE_Q = (
    ("Is the weather warmer in {a} than in {b} right now?", "warmer"),
    ("Tell me which one is colder, {a} or {b}.", "colder"), ("Compare {a} and {b}: which is warmer?", "warmer"),
    ("How do {a} and {b} compare weather-wise right now?", "both"), ("Report the weather in {a} and {b}.", "both"),
    ("I'm choosing between {a} and {b} for a trip. Which one is warmer right now?", "warmer"),
    ("Which place is colder at the moment: {a} or {b}?", "colder"),
    ("What are the current conditions in {a} and in {b}?", "both"),
    ("Where is it less warm today, {a} or {b}?", "colder"), ("Which is the warmer city today, {a} or {b}?", "warmer"))
TEMP_MATH_MORE_Q = (
    ("How much colder is {b} than {a} right now?", "difference"),
    ("What's the difference in temperature between {a} and {b} today?", "difference"),
    ("Compute the temperature difference of {a} and {b}.", "difference"),
    ("{a} and {b}: how many degrees is the difference?", "difference"),
    ("What do you get if you add {a}'s and {b}'s temperatures?", "sum"),
    ("Add together the temperatures in {a} and {b}.", "sum"), ("What's {a}'s temperature plus {b}'s?", "sum"),
    ("What is double the temperature in {a}?", "double"), ("Twice the current temperature of {a}?", "double"),
    ("If it got 5 degrees warmer in {a}, what would the temperature be?", "plus5"),
    ("What would {a}'s temperature be 5 degrees higher?", "plus5"),
    ("How many degrees below 30°C is {a} right now?", "below30"),
    ("How far is {a}'s temperature from 30°C?", "below30"),
    ("What is half of the temperature in {a}?", "half"), ("Halve the temperature in {a} for me.", "half"),
    # the fourth data set: the average and Fahrenheit, trained on phrasings of their own
    ("What's the average of the temperatures in {a} and {b}?", "average"),
    ("Average the current temperatures of {a} and {b}.", "average"),
    ("What is the mean of {a}'s and {b}'s temperatures?", "average"),
    ("Halfway between the temperatures of {a} and {b}: how warm is that?", "average"),
    ("Give me the average temperature across {a} and {b} today.", "average"),
    ("How warm is {a} in Fahrenheit?", "fahrenheit"), ("Convert {a}'s temperature to Fahrenheit.", "fahrenheit"),
    ("What is the temperature of {a} in °F?", "fahrenheit"),
    ("I think in Fahrenheit: how warm is it in {a} right now?", "fahrenheit"),
    ("Tell me {a}'s current temperature in degrees Fahrenheit.", "fahrenheit"))
NO_TOOL_MORE_Q = (  # the fourth data set: more questions that need no tool (greetings, words, facts)
    ("Good morning!", "Good morning! How can I help you?", "morning"),
    ("Who made you?", "I am a small language model running in ReAct Lab, with tools for the weather, "
     "arithmetic and an encyclopedia.", "model"),
    ("Are you a robot?", "I am a language model, a helpful assistant with a few tools.", "assistant"),
    ("What tools do you have?", "I have a weather tool, a calculator and a small encyclopedia with search and "
     "lookup.", "calculator"),
    ("Nice to meet you.", "Nice to meet you too!", "too"),
    ("Please say thank you in English.", "Thank you!", "thank"),
    ("What is the opposite of fast?", "The opposite of fast is slow.", "slow"),
    ("What is the opposite of open?", "The opposite of open is closed.", "closed"),
    ("What is the opposite of old?", "The opposite of old is young.", "young"),
    ("Translate 'water' into French.", "Water in French is eau.", "eau"),
    ("Translate 'dog' into Spanish.", "Dog in Spanish is perro.", "perro"),
    ("Translate 'good night' into German.", "Good night in German is gute Nacht.", "nacht"),
    ("How do you say 'yes' in Italian?", "Yes in Italian is sì.", "sì"),
    ("Spell the word map backwards.", "Backwards, map is pam.", "pam"),
    ("What is the first letter of the alphabet?", "The first letter of the alphabet is A.", "a"),
    ("How many days are in a week?", "A week has 7 days.", "7"),
    ("What colour are bananas when they are ripe?", "Ripe bananas are yellow.", "yellow"),
    ("What animal says meow?", "A cat says meow.", "cat"),
    ("Which season comes after winter?", "Spring comes after winter.", "spring"),
    ("What is the plural of mouse?", "The plural of mouse is mice.", "mice"),
    ("Give me a word that rhymes with cat.", "Hat rhymes with cat.", "hat"),
    ("What do bees make?", "Bees make honey.", "honey"),
    ("Can you tell me a short greeting in Spanish?", "Hola is a short greeting in Spanish.", "hola"),
    ("Thanks, that is all.", "You're welcome! Goodbye.", "welcome"))
ARITHMETIC_MORE_Q = (
    ("{x} students are split into groups of {n}. How many groups are there?", "{x} / {n}", "There are {r} groups."),
    ("What is {x} times {y}?", "{x} * {y}", "{x} times {y} is {r}."),
    ("How many days are in {n} weeks?", "{n} * 7", "There are {r} days in {n} weeks."),
    ("A bus has {x} seats and {y} are taken. How many are free?", "{x} - {y}", "{r} seats are free."),
    ("Compute {x} / {n} + {y}.", "{x} / {n} + {y}", "{x} / {n} + {y} = {r}."),
    ("I bought {n} tickets at {p} euros each. What did I pay?", "{n} * {p}", "You paid {r} euros."),
    ("What is {x} plus {y}?", "{x} + {y}", "{x} plus {y} is {r}."),
    ("A tank holds {d} litres and loses {y} litres. How much is left?", "{d} - {y}", "{r} litres are left."),
    ("How many grams are in {n} kilograms?", "{n} * 1000", "There are {r} grams in {n} kilograms."),
    ("What is {pct} percent of {d}?", "{d} * {pct} / 100", "{pct} percent of {d} is {r}."))
TWO_HOP_MORE_Q = (
    ("I just finished {book}. Where was its author born?", "place"),
    ("Which country was the author of {book} born in?", "place"), ("{book}'s author was born where?", "place"),
    ("Find the author of {book}, then tell me where they were born.", "place"),
    ("Tell me where the author of {book} was born.", "place"),
    ("Which city was the author of {book} born in?", "place"),
    ("What is the place of birth of the author of {book}?", "place"),
    ("Where was {book}'s writer born?", "place"),
    ("When was the author of {book} born?", "year"), ("Year of birth of the writer of {book}?", "year"),
    ("Birth year of {book}'s author, please.", "year"), ("The writer of {book} was born in which year?", "year"),
    ("Search for {book} and tell me the birth year of its author.", "year"),
    ("In which year was {book}'s novelist born?", "year"))
WHO_WROTE_MORE_Q = ("Who's the writer of {book}?", "Which novelist wrote {book}?", "Author of {book}?",
                    "Can you find out who wrote {book}?")
# --- the fifth data set (training side only, indexed after the *_MORE_Q above) ------------------
# Unknown places to copy into a call: accents, several words, hyphens, so a name never seen in
# training (the held-out Bogotá) is copied letter for letter rather than "corrected" into a known
# one. None is a weather city, a held-out unknown city or a train unknown city above (tested).
TRAIN_UNKNOWN_MORE = (
    "São Paulo", "Kraków", "Reykjavík", "Medellín", "Málaga", "Córdoba", "Düsseldorf", "Göteborg",
    "Montréal", "Poznań", "Brașov", "İzmir", "Valparaíso", "Asunción", "Ljubljana", "Tallinn",
    "Vilnius", "Jyväskylä", "Tromsø", "Aarhus", "Malmö", "Kyoto", "Dakar", "Accra", "Quito", "La Paz",
    "San José", "Marrakesh", "Tunis", "Cluj-Napoca", "Rio de Janeiro", "Cape Town", "Kuala Lumpur",
    "Ho Chi Minh City", "New Delhi", "Salt Lake City", "Las Palmas", "Sankt Gallen", "Łódź", "Škofja Loka",
    "Nuuk", "Ulaanbaatar", "Tbilisi", "Yerevan", "Almaty", "Bratislava", "Debrecen", "Thessaloniki")
# --- the seventh data set: weather worlds (training side only) ------------------------------------
# Every training run that asks the weather tool runs in a world of its own: the demo's tool on a
# table of readings drawn for that run (`world`). With the demo's one fixed table, the 10 training
# cities' readings never change, so "is Madrid warmer than Berlin" and "24 - 12" can be learnt by
# name; the held-out comparisons then named the wrong city ("Sydney is colder: 22°C … against 5°C").
# A world's readings change from run to run, so the answer has to be read from the observation, and
# its cities come from a wider list, so the call has to copy the name from the question. None is a
# held-out city, a held-out unknown place, or an unknown place of the training runs (tested).
WORLD_CITIES = TRAIN_CITIES + (
    "Hamburg", "Munich", "Köln", "Nürnberg", "Barcelona", "Valencia", "Seville", "Cádiz", "San Sebastián",
    "A Coruña", "Porto", "Amsterdam", "Rotterdam", "Brussels", "Antwerp", "Copenhagen", "Bergen", "Gdańsk",
    "Wrocław", "Budapest", "Bucharest", "Sofia", "Belgrade", "Zagreb", "Naples", "Milan", "Florence",
    "Venice", "Lyon", "Marseille", "Besançon", "Aix-en-Provence", "Geneva", "Salzburg", "Edinburgh",
    "Manchester", "Galway", "Montevideo", "Santiago", "Lagos", "Casablanca", "Osaka", "Busan", "Taipei",
    "Manila", "Bangkok", "Singapore", "Melbourne", "Auckland", "Vancouver", "Seattle", "Boston", "Miami",
    "Mexico City", "Havana", "Belo Horizonte", "Saint Petersburg", "Frankfurt am Main")
# The copy probe (bench/bench_copy.py): places whose name is ONE token after a space (" Tehran") but
# several inside the call's JSON string ("Te", "h", "ran"). The shipped adapter copied such a name
# wrong in 6 of 14 names it never saw (0 of 20 names of several tokens): "Zurica" for Zurich, in all
# five held-out sets. Never in a training run, and none is a held-out or trained place (tested).
COPY_PROBE_PLACES = (
    "Adelaide", "Baghdad", "Basel", "Birmingham", "Brisbane", "Cardiff", "Corinth", "Detroit", "Dubai",
    "Guatemala", "Hiroshima", "Jerusalem", "Johannesburg", "Leeds", "Liverpool", "Medina",
    "Newcastle", "Panama", "Phoenix", "Quebec", "Sparta", "Tehran", "Wellington", "Wuhan")
_CONDITIONS = ((1, ("snow", "snow showers", "freezing fog", "cloudy", "clear")),
               (10, ("rainy", "drizzle", "overcast", "cloudy", "windy", "light rain", "fog")),
               (19, ("cloudy", "partly cloudy", "sunny", "rainy", "windy", "light rain", "clear", "overcast")),
               (99, ("sunny", "clear", "thunderstorms", "partly cloudy", "humid", "hot and dry")))
WORLD_SIZE = len(WEATHER)  # a world knows as many cities as the demo, so its error lists as many


def reading(rng: random.Random, degrees: int) -> str:
    """A demo reading, "12°C, rainy": a condition that fits the temperature."""
    return f"{degrees}°C, {_pick(rng, next(c for top, c in _CONDITIONS if degrees <= top))}"


def world(known: tuple[str, ...], unknown: tuple[str, ...], rng: random.Random) -> dict[str, str]:
    """One run's table of readings: the cities it asks about (`known`, each a different temperature
    from -2 to 29 °C) among others from WORLD_CITIES, never the places it must find unknown."""
    others = [c for c in WORLD_CITIES if c not in known and c not in unknown]
    cities = list(known) + rng.sample(others, WORLD_SIZE - len(known))
    rng.shuffle(cities)
    temps = dict(zip(known, rng.sample(range(-2, 30), len(known)), strict=True))
    return {c: reading(rng, temps[c] if c in temps else rng.randrange(-2, 30)) for c in cities}


# --- the tenth data set: library worlds (training side only) ---------------------------------------
# The ten training authors' lookup("born") always gave one result, in one form. Two held-out authors
# are alive, and theirs gives two ("(Result 1/2) Margaret Atwood (born 1939) is a Canadian writer." and
# "(Result 2/2) She was born on …"): a form no training run read, and 4 of the 7 two-hop misses. Another
# run took the narrator the book's article names for its author. So most extra two-hop and who-wrote
# runs ask about an invented book in a library world of their own: the encyclopedia plus that book's
# article and its invented author's, drawn for the run (`library`) in the encyclopedia's own forms —
# an author alive ("(born Y) is", two results) or dead ("(Y–Z) was", one), born on a day or in a year,
# in or near a town; a book article that names a character too. The author changes from run to run,
# so the answer has to be read from the observations. No name, book or town is a held-out one (tested).
WORLD_BOOKS = (
    "The Salt Orchard", "A House on Marrow Street", "The Lantern Keepers", "Nine Winters in Aldery",
    "The Cartographer's Silence", "Letters from the Dry Valley", "The Orange Ferry", "A Grammar of Rain",
    "The Quiet Foundry", "Bells over Karsten", "The Paper Heron", "The Weight of Harbours",
    "Midnight at the Copper Mill", "The Long Field at Oste", "A Map for Swallows", "The Tin Orchestra",
    "Under the Almond Hill", "The Glass Ledger", "Winter of the Blue Foxes", "The Ferryman's Daughters")
_FIRST = {"she": ("Ana", "Marta", "Ingrid", "Sofia", "Leila", "Elena", "Amara", "Nadia", "Clara", "Irene",
                  "Beatriz", "Hanne"),
          "he": ("Tomás", "Piotr", "Jonas", "Emil", "Kwame", "Rafael", "Anders", "Mateo", "Viktor", "Hugo",
                 "Dario", "Kofi")}
_SURNAMES = ("Ferreyra", "Kowalczyk", "Lindqvist", "Okafor", "Marangoni", "Halvorsen", "Castellanos", "Novak",
             "Adeyemi", "Brandt", "Sørensen", "Oduya", "Villalobos", "Petrescu", "Moreau", "Haddad", "Quiroga",
             "Eriksen", "Mensah", "Alvarenga")
NATIONS = (("Chilean", "Chile", ("Valparaíso", "Temuco", "La Serena")),
           ("Polish", "Poland", ("Lublin", "Toruń", "Gdańsk")),
           ("Norwegian", "Norway", ("Bergen", "Tromsø", "Ålesund")),
           ("Ghanaian", "Ghana", ("Kumasi", "Cape Coast", "Tamale")),
           ("Italian", "Italy", ("Trieste", "Bari", "Perugia")),
           ("Mexican", "Mexico", ("Oaxaca", "Puebla", "Mérida")),
           ("Romanian", "Romania", ("Sibiu", "Iași", "Timișoara")),
           ("Danish", "Denmark", ("Odense", "Aalborg", "Esbjerg")),
           ("Brazilian", "Brazil", ("Recife", "Salvador", "Curitiba")),
           ("Egyptian", "Egypt", ("Alexandria", "Aswan", "Luxor")),
           ("Scottish", "Scotland", ("Aberdeen", "Dundee", "Inverness")),
           ("Peruvian", "Peru", ("Arequipa", "Cusco", "Trujillo")))
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_ROLES = ("writer", "novelist", "writer and journalist", "poet and novelist")
_SECOND_SENTENCES = ("It follows {char}, who leaves {town} to work as a teacher.",
                     "The story is narrated by {char}, who remembers a childhood in {town}.",
                     "Its hero is {char}, a ferry pilot in {town}.",
                     "It tells of {char} and the family's bakery in {town}.")
_THIRD_SENTENCES = ("It was translated into many languages.", "It is set over a single summer.",
                    "It is one of the best-known novels of {country}.", "It was made into a film.")


def _person(rng: random.Random) -> tuple[str, str]:
    """(name, pronoun) of an invented person."""
    pronoun = _pick(rng, ("she", "he"))
    return f"{_pick(rng, _FIRST[pronoun])} {_pick(rng, _SURNAMES)}", pronoun


def library(book: str, rng: random.Random) -> list[dict[str, str]]:
    """One run's invented articles: the book's and its author's, as encyclopedia.json writes them."""
    (name, he), (char, _) = _person(rng), _person(rng)
    while char.split()[1] == name.split()[1]:
        char, _ = _person(rng)
    nat, country, towns = NATIONS[rng.randrange(len(NATIONS))]
    town, other_town = rng.sample(towns, 2)
    born = rng.randrange(1880, 1996)
    alive = born >= 1925 and rng.random() < 0.85  # about half the authors: two results for "born"
    died = min(born + rng.randrange(40, 91), 2024)
    where = f"{_pick(rng, ('in', 'in', 'near'))} {town}, {country}"
    birth = _pick(rng, (f"was born on {rng.randrange(1, 29)} {_pick(rng, _MONTHS)} {born} {where}",  # a day: 2 in 3
                        f"was born on {rng.randrange(1, 29)} {_pick(rng, _MONTHS)} {born} {where}",
                        f"was born in {born} {where}"))
    his = {"he": "His", "she": "Her"}[he]
    other = _pick(rng, [b for b in WORLD_BOOKS if b != book])
    if alive:
        author = (f"{name} (born {born}) is a {nat} {_pick(rng, _ROLES)}. {he.title()} {birth}. "
                  f"{his} novels include {book} and {other}.")
    else:
        author = (f"{name} ({born}–{died}) was a {nat} {_pick(rng, _ROLES)}. {he.title()} {birth}. "
                  f"{his} books include {book} and {other}. {he.title()} died in {other_town} in {died}.")
    published = min(born + rng.randrange(25, 51), 2024)
    text = (f"{book} is a novel by the {nat} {_pick(rng, ('writer', 'novelist'))} {name}, published in "
            f"{published}. {_pick(rng, _SECOND_SENTENCES).format(char=char, town=other_town)} "
            f"{_pick(rng, _THIRD_SENTENCES).format(country=country)}")
    return [{"title": book, "text": text}, {"title": name, "text": author}]


# The eighth data set: "Tell me the … of the author of {book}" read as "who wrote it" (the held-out
# run stopped after the search), so the two-hop questions also come as requests that start that way.
TWO_HOP_EIGHTH_Q = (
    ("Tell me the birth year of the author of {book}.", "year"),
    ("Tell me the place of birth of whoever wrote {book}.", "place"),
    ("Tell me in which city the writer of {book} was born.", "place"),
    ("Tell me when the person who wrote {book} was born.", "year"))


# Operations in more words: a mean and a difference named as a student might ("midpoint", "gap").
TEMP_MATH_FIFTH_Q = (
    ("What is the mean temperature in {a} and {b} at the moment?", "average"),
    ("Tell me the average of {a}'s and {b}'s temperatures.", "average"),
    ("If you average {a} and {b}, what temperature do you get?", "average"),
    ("What's the midpoint between the temperatures of {a} and {b}?", "average"),
    ("What is the typical temperature across {a} and {b}, taking the mean?", "average"),
    ("How big is the gap in degrees between {a} and {b}?", "difference"),
    ("Find the difference between the temperatures in {a} and {b}.", "difference"),
    ("Add {a}'s temperature to {b}'s temperature.", "sum"),
    ("What is the combined temperature of {a} plus {b}?", "sum"),
    ("How many degrees Fahrenheit is it in {a} now?", "fahrenheit"),
    ("What does {a}'s temperature read on a Fahrenheit thermometer?", "fahrenheit"))
# Word problems: each operation under several stories, so the story's verb ("share", "each",
# "left", "by", "per") picks the operation rather than the order of the numbers.
ARITHMETIC_FIFTH_Q = (
    ("{x} sweets go equally into {n} bags. How many sweets are in each bag?", "{x} / {n}",
     "Each bag has {r} sweets."),
    ("A {d} km route is cut into {n} equal stages. How long is each stage in km?", "{d} / {n}",
     "Each stage is {r} km."),
    ("{n} colleagues pay {x} euros together, each the same share. What is one share?", "{x} / {n}",
     "One share is {r} euros."),
    ("How many euros per hour is {x} euros for {t} hours of work?", "{x} / {t}", "That is {r} euros per hour."),
    ("A field is {x} m by {n} m. How many square metres is it?", "{x} * {n}", "The field is {r} square metres."),
    ("A room measures {n} m by {y} m. What is its floor area?", "{n} * {y}", "The floor area is {r} square metres."),
    ("A cyclist rides {y} km every day for {n} days. How far is that in all?", "{y} * {n}",
     "That is {r} km in all."),
    ("{n} crates hold {x} apples each. How many apples is that?", "{n} * {x}", "That is {r} apples."),
    ("How many seconds are in {n} minutes?", "{n} * 60", "There are {r} seconds in {n} minutes."),
    ("A book has {d} pages and I have read {x}. How many pages are left?", "{d} - {x}", "{r} pages are left."),
    ("A jacket costs {x} euros. I pay with {d} euros. What change do I get?", "{d} - {x}",
     "You get {r} euros of change."),
    ("The temperature was {x} degrees and fell by {y}. What is it now?", "{x} - {y}", "It is now {r} degrees."),
    ("What is {pct}% of {d} euros?", "{d} * {pct} / 100", "{pct}% of {d} euros is {r} euros."),
    ("A class of {x} pupils grows by {y}. How many pupils are there now?", "{x} + {y}", "There are {r} pupils now."),
    ("Evaluate {x} * {n} - {y}.", "{x} * {n} - {y}", "{x} * {n} - {y} = {r}."))
# --- a SECOND held-out set (issue 24): phrasings written after the fourth data set and before any
# training on them, so it measures what the fourth set's changes (made after reading the first
# held-out set's misses) cannot have been fitted to. Held-out entities only; never trained.
HELD_OUT_2_Q = {
    "weather": ("Could you find out how the weather is in {city}?", "What's the weather like in {city} this morning?",
                "Is it warm or cold in {city} now?"),
    "compare": (("Which is warmer at present, {a} or {b}?", "warmer"),
                ("Tell me whether {a} or {b} is colder.", "colder"),
                ("What's the weather in {a}, and in {b}?", "both")),
    "temp_math": (("How many degrees warmer is the warmer of {a} and {b}?", "difference"),
                  ("What do the temperatures of {a} and {b} come to when added?", "sum"),
                  ("Work out the average of the temperatures in {a} and {b}.", "average"),
                  ("In Fahrenheit, how warm is it in {a}?", "fahrenheit")),
    "arithmetic": (("A pizza costs {x} euros and {n} people split it. What does each pay?", "{x} / {n}",
                    "Each pays {r} euros."),
                   ("What is {x} minus {y} minus {n}?", "{x} - {y} - {n}", "{x} - {y} - {n} = {r}."),
                   ("What is {n} cubed?", "{n} ** 3", "{n} cubed is {r}."),
                   ("Each of {n} shelves holds {y} books. How many books are there?", "{n} * {y}",
                    "There are {r} books.")),
    "two_hop": (("Who wrote {book}, and in which year was that writer born?", "year"),
                ("What is the home town of the author of {book}?", "place")),
    "who_wrote": ("Can you tell me who the author of {book} is?",),
    "no_tool": (("What is the opposite of left?", "The opposite of left is right.", "right"),
                ("Hello, what can you help me with?", "I can look up the current weather, compute arithmetic with a "
                 "calculator and search a small encyclopedia.", "weather"),
                ("Translate 'cheese' into French.", "Cheese in French is fromage.", "fromage"))}
# --- a THIRD held-out set: phrasings written after the eighth data set's training had begun and
# before any of its results were read (the eighth set's changes came from the first two sets'
# misses, so those two are no longer clean for them). Held-out entities only; never trained.
HELD_OUT_3_Q = {
    "weather": ("What's going on with the weather in {city}?", "Is it chilly in {city} today?",
                "Describe today's weather in {city}."),
    "compare": (("Right now, is {a} or {b} the warmer place?", "warmer"),
                ("Which one is colder at the moment, {a} or {b}?", "colder"),
                ("Can you give me the weather for {a} and for {b}?", "both")),
    "temp_math": (("By how many degrees do {a} and {b} differ right now?", "difference"),
                  ("What is {a}'s temperature added to {b}'s?", "sum"),
                  ("Calculate the mean of the temperatures in {a} and {b}.", "average"),
                  ("Give me {a}'s temperature in Fahrenheit, please.", "fahrenheit")),
    "arithmetic": (("A box of {n} eggs costs {p} euros. What does one egg cost?", "{p} / {n}",
                    "One egg costs {r} euros."),
                   ("What do you get when you subtract {y} from {x}?", "{x} - {y}", "{x} minus {y} is {r}."),
                   ("What is {n} times {x} plus {y}?", "{n} * {x} + {y}", "{n} * {x} + {y} = {r}."),
                   ("A runner does {n} laps of {d} metres. How many metres is that?", "{n} * {d}",
                    "That is {r} metres.")),
    "two_hop": (("The writer of {book}: where were they born?", "place"),
                ("Who is the author of {book}, and what year were they born in?", "year")),
    "who_wrote": ("{book} was written by whom?",),
    "no_tool": (("What is the opposite of wet?", "The opposite of wet is dry.", "dry"),
                ("Good afternoon!", "Good afternoon! How can I help you?", "afternoon"),
                ("How many wheels does a bicycle have?", "A bicycle has 2 wheels.", "2"))}
# --- a FOURTH held-out set: phrasings written with the ninth data set (one thought form for every
# question on two readings), before its adapter trained; the ninth set's change came from the third
# set's misses, so this one measures it clean. Held-out entities only; never trained.
HELD_OUT_4_Q = {
    "weather": ("What is the weather in {city} at this moment?", "Should I expect rain in {city} today?",
                "How does it feel outside in {city} right now?"),
    "compare": (("Which of {a} and {b} is warmer right now?", "warmer"),
                ("Is it colder in {a} or in {b} at the moment?", "colder"),
                ("Please tell me the weather in {a} and {b}.", "both")),
    "temp_math": (("How many degrees lie between {a} and {b} today?", "difference"),
                  ("What do {a}'s and {b}'s temperatures sum to?", "sum"),
                  ("On average, how warm are {a} and {b} right now?", "average"),
                  ("How many °F is it in {a} at the moment?", "fahrenheit")),
    "arithmetic": (("{n} children share {x} marbles equally. How many does each child get?", "{x} / {n}",
                    "Each child gets {r} marbles."),
                   ("What is {x} take away {y}?", "{x} - {y}", "{x} take away {y} is {r}."),
                   ("What is the product of {x} and {y}?", "{x} * {y}", "The product of {x} and {y} is {r}."),
                   ("I walk {y} km a day. How far do I walk in {n} days?", "{y} * {n}",
                    "You walk {r} km in {n} days.")),
    "two_hop": (("The author of {book}: which city were they born in?", "place"),
                ("I'd like to know the birth year of the novelist who wrote {book}.", "year")),
    "who_wrote": ("Whose book is {book}?",),
    "no_tool": (("What is the opposite of happy?", "The opposite of happy is sad.", "sad"),
                ("Hey there!", "Hello! How can I help you?", "hello"),
                ("How many months are in a year?", "A year has 12 months.", "12"))}
# --- a FIFTH held-out set: phrasings written after the tenth data set's adapter had trained and
# before any of its results were read (the tenth set's change came from the fourth set's misses, so
# this one measures it clean). Held-out entities only; never trained.
HELD_OUT_5_Q = {
    "weather": ("How is the weather over in {city}?", "Will I need a coat in {city} this afternoon?",
                "What are the conditions in {city} right now?"),
    "compare": (("Between {a} and {b}, where is it warmer now?", "warmer"),
                ("Where is it cooler right now: {a} or {b}?", "colder"),
                ("I'd like the current weather for both {a} and {b}.", "both")),
    "temp_math": (("What is the temperature gap between {a} and {b} right now?", "difference"),
                  ("If I add up the temperatures of {a} and {b}, what do I get?", "sum"),
                  ("What's the mean of {a}'s and {b}'s temperatures today?", "average"),
                  ("Convert the current temperature in {a} to Fahrenheit.", "fahrenheit")),
    "arithmetic": (("{n} friends split {x} cookies evenly. How many cookies does each friend get?", "{x} / {n}",
                    "Each friend gets {r} cookies."),
                   ("How much is {x} minus {y}?", "{x} - {y}", "{x} minus {y} is {r}."),
                   ("Multiply {x} by {y}.", "{x} * {y}", "{x} times {y} is {r}."),
                   ("A bus carries {y} people on each trip. How many people ride in {n} trips?", "{y} * {n}",
                    "{r} people ride in {n} trips.")),
    "two_hop": (("Where was the person who wrote {book} born?", "place"),
                ("In what year was the writer of {book} born?", "year")),
    "who_wrote": ("Which writer gave us {book}?",),
    "no_tool": (("What is the opposite of cold?", "The opposite of cold is hot.", "hot"),
                ("Good evening!", "Good evening! How can I help you?", "evening"),
                ("How many sides does a triangle have?", "A triangle has 3 sides.", "3"))}
# --- a SIXTH held-out set: phrasings written after the tenth data set shipped and before an eleventh
# (branch `eleventh`: single-token place names copied into the JSON call) was written or trained; the
# eleventh did not ship, so nothing shipped was changed after reading this set: it measures the shipped
# weights clean. Held-out entities only; never trained.
HELD_OUT_6_Q = {
    "weather": ("Tell me what the sky looks like over {city} today.", "Is the sun out in {city} at the moment?",
                "Report the current weather conditions for {city}."),
    "compare": (("Of {a} and {b}, which has the higher temperature now?", "warmer"),
                ("Which city is chillier today, {a} or {b}?", "colder"),
                ("Look up the weather in {a} and in {b} for me.", "both")),
    "temp_math": (("How much does the temperature in {a} differ from the one in {b}?", "difference"),
                  ("What number do you get by adding {a}'s temperature to {b}'s?", "sum"),
                  ("Find the average of today's temperatures in {a} and {b}.", "average"),
                  ("What would the thermometer in {a} read in Fahrenheit?", "fahrenheit")),
    "arithmetic": (("{n} workers divide {x} euros of tips equally. What does each worker receive?", "{x} / {n}",
                    "Each worker receives {r} euros."),
                   ("Subtract {y} from {x}.", "{x} - {y}", "{x} minus {y} is {r}."),
                   ("A hen lays {n} eggs a week. How many eggs does it lay in {y} weeks?", "{n} * {y}",
                    "It lays {r} eggs in {y} weeks."),
                   ("A ticket costs {p} euros. What do {n} tickets cost?", "{p} * {n}", "{n} tickets cost {r} euros.")),
    "two_hop": (("In which town or city was the author of {book} born?", "place"),
                ("Tell me the birth year of whoever wrote {book}.", "year")),
    "who_wrote": ("Whose novel is {book}?",),
    "no_tool": (("How many hours are in a day?", "A day has 24 hours.", "24"),
                ("What is the opposite of early?", "The opposite of early is late.", "late"),
                ("Good day to you!", "Good day! How can I help you?", "day"))}
# --- a SEVENTH held-out set: phrasings written while a twelfth data set's adapter trained (branch
# `twelfth`: word problems' thoughts, made after reading the first six sets' misses) and before any
# of its results were read, so it measures it clean. Held-out entities only; never trained.
HELD_OUT_7_Q = {
    "weather": ("Can you check the current weather in {city}?", "Is it hot in {city} right now?",
                "What's the weather up to in {city}?"),
    "compare": (("Which is hotter right now, {a} or {b}?", "warmer"),
                ("Is {a} or {b} the cooler of the two today?", "colder"),
                ("Give me the current weather in {a} as well as {b}.", "both")),
    "temp_math": (("Work out how much warmer or colder {a} is than {b}.", "difference"),
                  ("Sum up the temperatures of {a} and {b} for me.", "sum"),
                  ("Take the temperatures of {a} and {b} and give me their average.", "average"),
                  ("Tell me in Fahrenheit how warm {a} is.", "fahrenheit")),
    "arithmetic": (("{x} euros are shared equally among {n} children. How much does each child get?", "{x} / {n}",
                    "Each child gets {r} euros."),
                   ("Take {y} away from {x}.", "{x} - {y}", "{x} minus {y} is {r}."),
                   ("A car uses {p} litres of fuel a day. How many litres does it use in {n} days?", "{p} * {n}",
                    "It uses {r} litres in {n} days."),
                   ("What do {x} and {y} add up to?", "{x} + {y}", "{x} plus {y} is {r}.")),
    "two_hop": (("Where was the novelist behind {book} born?", "place"),
                ("What's the year of birth of the author of {book}?", "year")),
    "who_wrote": ("Do you know who authored {book}?",),
    "no_tool": (("What is the opposite of loud?", "The opposite of loud is quiet.", "quiet"),
                ("Hi, how are you today?", "I'm fine, thank you! How can I help you?", "help"),
                ("How many minutes are in an hour?", "An hour has 60 minutes.", "60"))}
BAD_ARGUMENTS = ({"location": "{city}"}, {"town": "{city}"}, {"city_name": "{city}"}, {"place": "{city}"})


def _pick(rng: random.Random, options: tuple[str, ...] | list[str]) -> str:
    return options[rng.randrange(len(options))]


# --- the oracle's rules: one per kind ---------------------------------------------------------------

def next_turn(task: Task, seen: tuple[Seen, ...]) -> Turn:
    """The oracle: the next assistant turn from the task and the observations seen so far."""
    return RULES[task.kind](task, seen, random.Random(task.seed * 7919 + len(seen)))


def _degrees(report: str) -> int:
    return int(re.match(r"(-?\d+)°C", report).group(1))


def _weather(task: Task, seen: tuple[Seen, ...], rng: random.Random) -> Turn:
    city = task.entities[0]
    if not seen:
        return Turn(_pick(rng, (f"I need the current weather in {city}.",
                                f"The weather tool can tell me the weather in {city}.",
                                f"I cannot know the weather in {city}; I ask the weather tool.")),
                    (("get_weather", {"city": city}),))
    report = seen[-1].content
    return Turn(answer=_pick(rng, (f"The weather in {city} is {report}.", f"It is {report} in {city}.",
                                   f"{city}: {report}.", f"Right now {city} has {report}.")))


def _unknown(task: Task, seen: tuple[Seen, ...], rng: random.Random) -> Turn:
    city = task.entities[0]
    if not seen:
        return _weather(task, seen, rng)
    return Turn(answer=_pick(rng, (f"I don't know the weather in {city}: the weather tool has no data for it.",
                                   f"Sorry, the weather tool has no data for {city}, so I cannot tell you.",
                                   f"I cannot say: there is no weather data for {city}.")))


def _both_cities(task: Task, seen: tuple[Seen, ...], rng: random.Random) -> Turn | None:
    """Ask for the weather of both cities: in one turn, or one after the other (by the seed). A
    temperature sum, difference or average says in its first thought that the calculator follows."""
    a, b = task.entities[:2]
    got = {s.arguments.get("city") for s in seen if s.name == "get_weather"}
    if not got:
        plan = PLAN.get(task.facts.get("op") or task.facts.get("lead"))
        then = f"; then I {plan} with the calculator" if plan else ""
        if task.seed % 3 == 2:
            return Turn(f"I need the weather in {a} first, then in {b}{then}.", (("get_weather", {"city": a}),))
        return Turn(_pick(rng, (f"I need the current weather in both {a} and {b}{then}.",
                                f"I ask the weather tool for {a} and for {b}{then}.")),
                    (("get_weather", {"city": a}), ("get_weather", {"city": b})))
    if b not in got:
        return Turn(f"{a} has {seen[-1].content}; now I need {b}.", (("get_weather", {"city": b}),))
    return None


def two_readings(a: str, ta: int, b: str, tb: int) -> str:
    """The thought before the calculator, alike for every question on two readings (a comparison, a
    difference, a sum, an average): the readings, each number next to its city ("12°C in Berlin", so
    the answer can copy the city after the number the calculator returns), then "; the <what the
    first thought planned> is <expression>." The eighth data set's differences began "Berlin has
    12°C and Rome has 21°C; I compute the difference with the calculator." and its comparisons "It
    is 12°C in Berlin …": the held-out comparisons followed the more frequent first form and wrote a
    difference ("24 - 19") where max / min was planned. One form leaves one choice, the words after
    "; the ", which copy the plan's ("then I pick the colder reading", "then I compute the sum")."""
    return f"It is {ta}°C in {a} and {tb}°C in {b}"


def _reports(seen: tuple[Seen, ...]) -> dict[str, str]:
    return {s.arguments["city"]: s.content for s in seen if s.name == "get_weather" and s.kind == ResultKind.OK}


def _compare(task: Task, seen: tuple[Seen, ...], rng: random.Random) -> Turn:
    """Both readings; for "which is warmer / colder" the calculator then picks the reading (max / min),
    and the answer copies the city written next to it in the thought ("21°C in Rome"): a 135M model
    trained to compare the two numbers itself named the first city whatever the readings (the seventh
    data set), and copying is what a small model does well."""
    turn = _both_cities(task, seen, rng)
    if turn is not None:
        return turn
    reports, (a, b), lead = _reports(seen), task.entities[:2], task.facts["lead"]
    if lead == "both":
        return Turn(answer=f"In {a} it is {reports[a]}; in {b} it is {reports[b]}.")
    ta, tb = _degrees(reports[a]), _degrees(reports[b])
    pick = PICK[lead]
    calc = [s for s in seen if s.name == "calculator"]
    if not calc:
        return Turn(f"{two_readings(a, ta, b, tb)}; the {lead} reading is {pick}({ta}, {tb}).",
                    (("calculator", {"expression": f"{pick}({ta}, {tb})"}),))
    t = int(calc[-1].content)
    city, other = (a, b) if t == ta else (b, a)
    return Turn(answer=f"{t}°C in {city} is {lead} than {_degrees(reports[other])}°C in {other}, "
                       f"so {city} is {lead}.")


def _temp_math(task: Task, seen: tuple[Seen, ...], rng: random.Random) -> Turn:
    op = task.facts["op"]
    if op in ONE_CITY_OPS:
        return _one_city(task, seen, rng)
    turn = _both_cities(task, seen, rng)
    if turn is not None:
        return turn
    reports, (a, b) = _reports(seen), task.entities[:2]
    ta, tb = _degrees(reports[a]), _degrees(reports[b])
    calc = [s for s in seen if s.name == "calculator"]
    if not calc:
        hi, lo = max(ta, tb), min(ta, tb)
        expression = {"difference": f"{hi} - {lo}", "sum": f"{ta} + {tb}", "average": f"({ta} + {tb}) / 2"}[op]
        return Turn(f"{two_readings(a, ta, b, tb)}; the {op} is {expression}.",
                    (("calculator", {"expression": expression}),))
    r = calc[-1].content
    return Turn(answer={"difference": f"The difference is {r}°C: {a} has {ta}°C and {b} has {tb}°C.",
                        "sum": f"The sum is {r}°C: {a} has {ta}°C and {b} has {tb}°C.",
                        "average": f"The average is {r}°C: {a} has {ta}°C and {b} has {tb}°C."}[op])


def _one_city(task: Task, seen: tuple[Seen, ...], rng: random.Random) -> Turn:
    """One city's temperature, then the calculator on it (ONE_CITY_OPS: its expression and answer)."""
    city, (expression, thought, answer) = task.entities[0], ONE_CITY_OPS[task.facts["op"]]
    if not seen:
        return Turn(f"I need the current weather in {city}; then I {PLAN[task.facts['op']]} with the calculator.",
                    (("get_weather", {"city": city}),))
    t = _degrees(seen[0].content)
    if len(seen) == 1:
        return Turn(thought.format(city=city, t=t, e=expression.format(t=t)),
                    (("calculator", {"expression": expression.format(t=t)}),))
    return Turn(answer=answer.format(city=city, t=t, r=seen[-1].content))


def _arithmetic(task: Task, seen: tuple[Seen, ...], rng: random.Random) -> Turn:
    expression = task.facts["expression"]
    if not seen:
        return Turn(_pick(rng, (f"I compute {expression} with the calculator.",
                                f"I cannot compute exactly in my head; the calculator does {expression}.")),
                    (("calculator", {"expression": expression}),))
    return Turn(answer=task.facts["answer"].format(r=seen[-1].content))


_AUTHOR = re.compile(r"by the (?:[\w-]+ )*?(?:writer|novelist)(?: and aviator)? (.+?), (?:first )?published")


def author_of(search_result: str) -> str:
    return _AUTHOR.search(search_result).group(1)


def _birth(lookup_result: str) -> tuple[str, str]:
    """(place phrase, year) from lookup's "…was born on 15 October 1923 in Santiago…" sentence."""
    sentence = next(s for s in lookup_result.split("\n") if "was born" in s)
    sentence = re.sub(r"^\(Result \d+/\d+\) ", "", sentence)
    place = re.search(r"\b((?:in|near) [A-ZÀ-Þ][^.]*)\.?$", re.sub(r"in \d{4} ", "", sentence)).group(1)
    return place, re.search(r"\b(\d{4})\b", sentence).group(1)


def _two_hop(task: Task, seen: tuple[Seen, ...], rng: random.Random) -> Turn:
    book = task.entities[0]
    if not seen:  # the thought names the plan: who wrote it, and (two-hop) then the author's birth
        if task.kind == "search":
            thought = _pick(rng, (f"I search for {book} to find its author.",
                                  f"The encyclopedia can tell me who wrote {book}."))
        else:
            when = "where" if task.facts["ask"] == "place" else "when"
            thought = _pick(rng, (f"I need the author of {book} first; then I look up {when} the author was born.",
                                  f"First I search for {book} to find its author, then {when} they were born."))
        return Turn(thought, (("search", {"query": book}),))
    author = author_of(seen[0].content)
    if len(seen) == 1 and task.kind == "search":
        return Turn(answer=_pick(rng, (f"{book} was written by {author}.", f"The author of {book} is {author}.")))
    if len(seen) == 1:
        return Turn(f"The author is {author}; now I look up when and where {author} was born.",
                    (("lookup", {"term": "born", "article": author}),))
    place, year = _birth(seen[-1].content)  # the year and the place, whichever was asked: one answer
    return Turn(answer=f"{author}, the author of {book}, was born in {year} {place}.")


def _no_tool(task: Task, seen: tuple[Seen, ...], rng: random.Random) -> Turn:
    return Turn(answer=task.facts["answer"])


def _repair(task: Task, seen: tuple[Seen, ...], rng: random.Random) -> Turn:
    city = task.entities[0]
    if not seen:
        bad = {k: v.format(city=city) for k, v in task.facts["bad"].items()}
        return Turn(f"I need the current weather in {city}.", (("get_weather", bad),), trained=False)
    if seen[-1].kind == ResultKind.VALIDATION_ERROR:
        return Turn('The tool expects the argument "city"; I repeat the call with it.',
                    (("get_weather", {"city": city}),))
    return _weather(task, seen[-1:], rng)


RULES = {"weather": _weather, "unknown_city": _unknown, "compare": _compare, "temp_math": _temp_math,
         "arithmetic": _arithmetic, "two_hop": _two_hop, "search": _two_hop, "no_tool": _no_tool, "repair": _repair}


def book_author(book: str) -> str:
    article = next(a for a in load_encyclopedia() if a.title == book)
    return author_of(article.text)
