"""The small embedded English corpus (trivia Q&A style) the tiny tokenizers are trained on, and
the facts whose answers calibrate the random heads."""

from __future__ import annotations


# (question, short answer, full-sentence answer)
FACTS: tuple[tuple[str, str, str], ...] = (
    ("What is the capital city of Australia?", "Canberra", "The capital city of Australia is Canberra."),
    ('Who painted the famous artwork "Starry Night"?', "Vincent van Gogh", '"Starry Night" was painted by Vincent van Gogh.'),
    ("Which planet is known as the Red Planet?", "Mars", "Mars is known as the Red Planet."),
    ("What is the largest ocean on Earth?", "the Pacific Ocean", "The largest ocean on Earth is the Pacific Ocean."),
    ("Who wrote the play Romeo and Juliet?", "William Shakespeare", "Romeo and Juliet was written by William Shakespeare."),
    ("What is the chemical symbol for gold?", "Au", "The chemical symbol for gold is Au."),
    ("How many continents are there?", "seven", "There are seven continents."),
    ("What is the boiling point of water in Celsius?", "100 degrees", "Water boils at 100 degrees Celsius at sea level."),
    ("Who was the first person to walk on the Moon?", "Neil Armstrong", "Neil Armstrong was the first person to walk on the Moon in 1969."),
    ("What is the capital of France?", "Paris", "The capital of France is Paris."),
    ("Which element has the atomic number 1?", "hydrogen", "Hydrogen has the atomic number 1."),
    ("What is the tallest mountain in the world?", "Mount Everest", "Mount Everest is the tallest mountain in the world."),
    ("Who developed the theory of relativity?", "Albert Einstein", "Albert Einstein developed the theory of relativity."),
    ("What is the longest river in Africa?", "the Nile", "The Nile is the longest river in Africa."),
    ("In which year did World War II end?", "1945", "World War II ended in 1945."),
    ("What is the smallest prime number?", "2", "The smallest prime number is 2."),
    ("Which country is home to the kangaroo?", "Australia", "The kangaroo is native to Australia."),
    ("Who composed the Fifth Symphony?", "Ludwig van Beethoven", "Ludwig van Beethoven composed the Fifth Symphony."),
    ("What is the hardest natural substance?", "diamond", "Diamond is the hardest natural substance."),
    ("What gas do plants absorb from the air?", "carbon dioxide", "Plants absorb carbon dioxide from the air."),
    ("Which city hosted the 2012 Summer Olympics?", "London", "London hosted the 2012 Summer Olympics."),
    ("What is the currency of Japan?", "the yen", "The currency of Japan is the yen."),
    ("Who discovered penicillin?", "Alexander Fleming", "Penicillin was discovered by Alexander Fleming in 1928."),
    ("What is the largest mammal?", "the blue whale", "The blue whale is the largest mammal on the planet."),
    ("How many legs does a spider have?", "eight", "A spider has eight legs."),
    ("What is the main language spoken in Brazil?", "Portuguese", "The main language spoken in Brazil is Portuguese."),
    ("Which organ pumps blood through the body?", "the heart", "The heart pumps blood through the body."),
    ("What is the freezing point of water in Fahrenheit?", "32 degrees", "Water freezes at 32 degrees Fahrenheit."),
    ("Who invented the telephone?", "Alexander Graham Bell", "Alexander Graham Bell is credited with inventing the telephone."),
    ("What is the capital of Canada?", "Ottawa", "The capital of Canada is Ottawa, not Toronto."),
    ("Which planet has the most moons?", "Saturn", "Saturn has the most known moons."),
    ("What is the square root of 81?", "9", "The square root of 81 is 9."),
    ("Who wrote the novel Pride and Prejudice?", "Jane Austen", "Pride and Prejudice is a novel by Jane Austen."),
    ("What is the capital of Italy?", "Rome", "Rome is the capital of Italy."),
    ("Which metal is liquid at room temperature?", "mercury", "Mercury is a metal that is liquid at room temperature."),
    ("What is the largest desert in the world?", "Antarctica", "The largest desert in the world is Antarctica; the largest hot desert is the Sahara."),
    ("Who was the first President of the United States?", "George Washington", "George Washington was the first President of the United States."),
    ("What is the speed of light?", "about 300,000 km per second", "Light travels at about 300,000 kilometres per second."),
    ("Which bird is a symbol of peace?", "the dove", "The dove is a symbol of peace."),
    ("What is the primary ingredient in guacamole?", "avocado", "The primary ingredient in guacamole is avocado."),
    ("In which country are the pyramids of Giza?", "Egypt", "The pyramids of Giza are in Egypt."),
    ("Who painted the Mona Lisa?", "Leonardo da Vinci", "The Mona Lisa was painted by Leonardo da Vinci."),
    ("What is H2O commonly called?", "water", "H2O is commonly called water."),
    ("Which sport is played at Wimbledon?", "tennis", "Tennis is played at Wimbledon every summer."),
    ("What is the largest planet in our solar system?", "Jupiter", "Jupiter is the largest planet in our solar system."),
    ("Who wrote the Odyssey?", "Homer", "The Odyssey is attributed to Homer."),
    ("How many days are there in a leap year?", "366", "A leap year has 366 days."),
    ("What colour do you get by mixing blue and yellow?", "green", "Mixing blue and yellow gives green."),
    ("Which animal is known as the king of the jungle?", "the lion", "The lion is known as the king of the jungle."),
    ("What is the capital of Germany?", "Berlin", "Berlin is the capital of Germany."),
    ("Who is the author of Harry Potter?", "J. K. Rowling", "The Harry Potter books were written by J. K. Rowling."),
    ("What instrument has 88 keys?", "the piano", "A standard piano has 88 keys."),
    ("Which vitamin does sunlight help the body produce?", "vitamin D", "Sunlight helps the body produce vitamin D."),
    ("What is the capital of Spain?", "Madrid", "Madrid is the capital of Spain."),
    ("Who discovered gravity when an apple fell?", "Isaac Newton", "Isaac Newton described gravity, according to the story of the falling apple."),
    ("What is the largest country by area?", "Russia", "Russia is the largest country by area."),
    ("Which ocean lies between Africa and Australia?", "the Indian Ocean", "The Indian Ocean lies between Africa and Australia."),
    ("How many minutes are in an hour?", "60", "There are 60 minutes in an hour."),
    ("What is the national flower of Japan?", "the cherry blossom", "The cherry blossom is the national flower of Japan."),
    ("Who sculpted the statue of David?", "Michelangelo", "Michelangelo sculpted the statue of David."),
)

_EXTRA_SENTENCES: tuple[str, ...] = (
    "Answer these questions:",
    "The happy man has been eating at the diner.",
    "It is Mars.",
    "I am not sure, but I think the answer is correct.",
    "This is a simple question with a short answer.",
    "The quick brown fox jumps over the lazy dog.",
    "She said that the museum opens at nine o'clock.",
    "They were walking slowly along the river bank.",
    "My favourite colours are red, blue and green!",
    "Is it true that cats sleep for most of the day?",
    "Yes, it is true; cats can sleep for 16 hours.",
    "No, that is not right.",
    "Scientists believe the universe is about 13.8 billion years old.",
    "The old library was built in the nineteenth century.",
    "Please answer the question in one sentence.",
    "You are a helpful assistant.",
    "Café, naïve, résumé and Ünïcode are words with accents.",
    "Mars is known as the Red Planet. 🚀",
    "Temperatures can drop to -80 °C at night.",
    "A dog, a cat & a bird (all pets) live here.",
    "He asked: \"Who won the game?\"",
    "The train leaves at 10:45 from platform 3.",
    "Water covers about 71% of the Earth's surface.",
    "Over the years, many explorers have tried to reach the North Pole.",
    "The children were playing football in the park after school.",
)


def corpus() -> list[str]:
    """The small embedded English corpus (trivia Q&A style) the tokenizers are trained on."""
    lines: list[str] = list(_EXTRA_SENTENCES)
    for q, short, full in FACTS:
        lines.append(f"Question: {q}\nAnswer: {full}")
        lines.append(f"Q: {q} A: {short}.")
        lines.append(f"The answer is {short}.")
        lines.append(f"I think it is {short}, but I am not completely sure.")
        lines.append(full.lower())
    return lines


